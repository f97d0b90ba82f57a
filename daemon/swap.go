package daemon

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/swapdev"
)

// Swap devices (#28): block devices served through the kernel's ublk
// driver, their control plane package swapdev. The daemon wires them up:
// it builds the set (newSwaps), starts it when it starts serving and
// stops it when it stops (server.go), keeps their pages in its store
// across a restart (swappool.go), and answers SWAP here, in the wire's
// types.

// newSwaps is d's set of swap devices, empty until Start.
func (d *Daemon) newSwaps() *swapdev.Set {
	return swapdev.New(swapdev.Config{PageSize: d.cfg.PageSize, Persist: d.cfg.Persist, Takeover: d.cfg.SwapTakeover,
		Specs: d.cfg.Swap, Dir: filepath.Dir(d.cfg.Socket), Writeback: stateDir(), Log: d.log, Quit: d.quit}, swapStore{d})
}

// stateDir is the daemon's state directory: the unit's StateDirectory
// (systemd's $STATE_DIRECTORY), else /var/lib/s4d where it exists; "" if
// neither.
func stateDir() string {
	if v, _, _ := strings.Cut(os.Getenv("STATE_DIRECTORY"), ":"); v != "" {
		return v
	}
	if fi, err := os.Stat("/var/lib/s4d"); err == nil && fi.IsDir() {
		return "/var/lib/s4d"
	}
	return ""
}

// swap answers SWAP. Devices serve the whole machine, so only root may.
func (c *conn) swap(body []byte) ([]byte, error) {
	var req ipc.SwapRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, errorf(ipc.CodeMalformed, "SWAP body: %v", err)
	}
	if c.uid != 0 {
		return nil, errorf(ipc.CodePermission, "only root may manage swap devices")
	}
	switch req.Action {
	case ipc.SwapAdd:
		dev, err := c.d.swaps.Add(swapdev.Request{Size: req.Size, Queues: req.Queues, Depth: req.Depth, Reserve: req.Reserve,
			MemLimit: req.MemLimit, Writeback: req.Writeback})
		if err != nil {
			return nil, swapErr(err)
		}
		return c.jsonBody([]ipc.SwapDevice{ipc.SwapDevice(dev)})
	case ipc.SwapDel:
		devs, err := c.d.swaps.Del(req.Device)
		if err != nil {
			return nil, swapErr(err)
		}
		return c.jsonBody(swapDevices(devs))
	case ipc.SwapList:
		return c.jsonBody(swapDevices(c.d.swaps.List()))
	}
	return nil, errorf(ipc.CodeMalformed, "SWAP action %q: want add, del or list", req.Action)
}

// swapDevices is devs in the wire's form; nil stays nil (JSON null), as
// an empty list stays empty.
func swapDevices(devs []swapdev.Device) []ipc.SwapDevice {
	if devs == nil {
		return nil
	}
	out := make([]ipc.SwapDevice, len(devs))
	for i, dev := range devs {
		out[i] = ipc.SwapDevice(dev) // the same fields (swapdev.Device)
	}
	return out
}

// swapErr answers a refusal of the swap set with its status; of several
// (a del of devices in use), the first, as finish would.
func swapErr(err error) error {
	var e *swapdev.Error
	if !errors.As(err, &e) {
		return err
	}
	code := ipc.CodeFailed
	switch e.Kind {
	case swapdev.Malformed:
		code = ipc.CodeMalformed
	case swapdev.NotFound:
		code = ipc.CodeNotFound
	}
	return &ipc.Error{Code: code, Msg: e.Msg}
}
