package remote

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// writeCert makes a CA and a server certificate for 127.0.0.1 in dir.
func writeCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	pemFile := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "s4d test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "valkey"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	pemFile("ca.crt", "CERTIFICATE", caDER)
	pemFile("server.crt", "CERTIFICATE", der)
	pemFile("server.key", "EC PRIVATE KEY", keyDER)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return pool
}

// One node over TLS only, cluster support disabled: the client treats it
// as the owner of every slot. A client that does not trust the CA fails.
func TestTLSStandalone(t *testing.T) {
	server, _, err := binaries()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	pool := writeCert(t, dir)
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	p := exec.Command(server, "--port", "0", "--tls-port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1",
		"--tls-cert-file", filepath.Join(dir, "server.crt"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.crt"), "--tls-auth-clients", "no",
		"--requirepass", testPass, "--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "log"))
	p.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { p.Process.Kill(); p.Wait() }()
	addrs, useTLS, err := ParseURL("valkeys://127.0.0.1:" + strconv.Itoa(ports[0]))
	if err != nil || !useTLS {
		t.Fatal(err)
	}
	o := Options{Addrs: addrs, Password: testPass, TLS: &tls.Config{RootCAs: pool}, RetryFor: 2 * time.Second}
	var c *Cluster
	if err := waitFor(10*time.Second, func() (err error) { c, err = Dial(context.Background(), o); return err }); err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "log"))
		t.Fatalf("%v\n%s", err, b)
	}
	defer c.Close()
	s, err := NewStore(c, testKey)
	if err != nil {
		t.Fatal(err)
	}
	ns := Namespace{"host-tls", "pool"}
	bs := randBlocks(40, 20000, 1)
	mustPut(t, s, ns, bs)
	checkGet(t, s, ns, bs)
	if err := c.CheckNoEviction(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	// The tier as the daemon opens it: valkeys://, --remote-ca-file.
	tc := TierConfig{URL: "valkeys://127.0.0.1:" + strconv.Itoa(ports[0]), CAFile: filepath.Join(dir, "ca.crt"),
		CredFile: secretFile(t, "creds", []byte(testPass+"\n")), KeyFile: secretFile(t, "key", testKey),
		Host: "tls", Options: Options{RetryFor: 2 * time.Second}}
	tr := openTier(t, tc)
	objs := randObjs(mrand.New(mrand.NewPCG(5, 6)), 50)
	l := NewLevel(tr, "cold")
	locs, err := l.Store(testCtx(t), objs)
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, l, locs, objs)
	tc.CAFile = ""
	if tr2, err := OpenTier(testCtx(t), tc); err == nil {
		tr2.Close()
		t.Fatal("the tier opened without --remote-ca-file")
	}

	o.TLS = &tls.Config{} // the system roots: our CA is not among them
	if c2, err := Dial(context.Background(), o); err == nil {
		c2.Close()
		t.Fatal("connected without trusting the server's CA")
	}
}
