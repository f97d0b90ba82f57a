package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/swapdev"
)

// The swap set's refusals reach the wire with the status of their kind
// and their message alone; of several (a del of devices in use), the
// first, as finish answers any joined error.
func TestSwapErr(t *testing.T) {
	for _, c := range []struct {
		err  error
		code ipc.Code
		msg  string
	}{
		{&swapdev.Error{Kind: swapdev.Failed, Msg: "ublk is not available"}, ipc.CodeFailed, "ublk is not available"},
		{&swapdev.Error{Kind: swapdev.Malformed, Msg: "swap size 12 bytes"}, ipc.CodeMalformed, "swap size 12 bytes"},
		{&swapdev.Error{Kind: swapdev.NotFound, Msg: "no swap device /dev/ublkb9"}, ipc.CodeNotFound, "no swap device /dev/ublkb9"},
		{errors.Join(&swapdev.Error{Kind: swapdev.Failed, Msg: "a in use"}, &swapdev.Error{Kind: swapdev.Failed, Msg: "b in use"}), ipc.CodeFailed, "a in use"},
	} {
		var e *ipc.Error
		if !errors.As(swapErr(c.err), &e) || e.Code != c.code || e.Msg != c.msg {
			t.Errorf("%v: answered %v, want %v %q", c.err, e, c.code, c.msg)
		}
		// Logged, it reads as the wire's error of the same code did.
		if se, ok := c.err.(*swapdev.Error); ok {
			if got, want := se.Error(), (&ipc.Error{Code: c.code, Msg: c.msg}).Error(); got != want {
				t.Errorf("logged as %q, want %q", got, want)
			}
		}
	}
	other := fmt.Errorf("something else")
	if swapErr(other) != other {
		t.Error("an error of no kind was not passed on as it was (INTERNAL)")
	}
}

// A list of no devices is [], a del that removed none null, as before the
// set had types of its own; a device's fields keep their JSON names.
func TestSwapDevicesJSON(t *testing.T) {
	for _, c := range []struct {
		in   []swapdev.Device
		want string
	}{
		{nil, "null"},
		{[]swapdev.Device{}, "[]"},
	} {
		if b, _ := json.Marshal(swapDevices(c.in)); string(b) != c.want {
			t.Errorf("%#v: %s, want %s", c.in, b, c.want)
		}
	}
	b, _ := json.Marshal(swapDevices([]swapdev.Device{{Name: "/dev/ublkb0", DiskSize: 1 << 20, Pool: "native", HeldFailed: 3, Priority: -1}}))
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil || got[0]["name"] != "/dev/ublkb0" || got[0]["disksize"] != float64(1<<20) ||
		got[0]["pool"] != "native" || got[0]["held_failed"] != float64(3) || got[0]["priority"] != float64(-1) {
		t.Fatalf("%s, %v", b, err)
	}
}
