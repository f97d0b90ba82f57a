package ipc

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkUnixStream is the ceiling of the copy path: streams of bytes
// already made, written in 512 KiB pieces (as the daemon streams a GET)
// and read into one 16 MiB buffer per reply, over 1 to 8 Unix stream
// connections at once. A GET through the socket cannot beat it.
func BenchmarkUnixStream(b *testing.B) {
	const reply, piece = 16 << 20, 512 << 10
	for _, streams := range []int{1, 8} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			type pair struct {
				w, r     net.Conn
				src, dst []byte
			}
			pairs := make([]pair, streams)
			for i := range pairs {
				fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
				if err != nil {
					b.Fatal(err)
				}
				var cs [2]net.Conn
				for j, fd := range fds {
					f := os.NewFile(uintptr(fd), "stream")
					if cs[j], err = net.FileConn(f); err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
				pairs[i] = pair{cs[0], cs[1], make([]byte, piece), make([]byte, reply)}
				clear(pairs[i].dst)
				defer cs[0].Close()
				defer cs[1].Close()
			}
			b.SetBytes(int64(reply * streams))
			for b.Loop() {
				var wg sync.WaitGroup
				for _, p := range pairs {
					wg.Add(2)
					go func() {
						defer wg.Done()
						for sent := 0; sent < reply; sent += piece {
							p.w.Write(p.src)
						}
					}()
					go func() {
						defer wg.Done()
						io.ReadFull(p.r, p.dst)
					}()
				}
				wg.Wait()
			}
		})
	}
}
