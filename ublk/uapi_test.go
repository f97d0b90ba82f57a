package ublk

import (
	"testing"
	"unsafe"
)

// The Go copies must match the kernel's struct sizes and offsets.
func TestLayouts(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"io_uring_params", unsafe.Sizeof(uringParams{}), 120},
		{"ublksrv_ctrl_cmd", unsafe.Sizeof(ctrlCmd{}), 32},
		{"ublksrv_ctrl_dev_info", unsafe.Sizeof(DevInfo{}), 64},
		{"ublksrv_io_desc", unsafe.Sizeof(ioDesc{}), 24},
		{"ublksrv_io_cmd", unsafe.Sizeof(ioCmd{}), 16},
		{"ublk_param_basic", unsafe.Sizeof(paramBasicT{}), 32},
		{"ublk_param_discard", unsafe.Sizeof(paramDiscardT{}), 20},
		{"ublk_params.discard offset", unsafe.Offsetof(params{}.Discard), 40},
		{"dev_info.flags offset", unsafe.Offsetof(DevInfo{}.Flags), 24},
		{"io_uring_params.cq_off", unsafe.Offsetof(uringParams{}.CqOff), 80},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, c.got, c.want)
		}
	}
}

// The opcodes are the kernel's UBLK_U_* values.
func TestOpcodes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint32
	}{
		{"UBLK_U_CMD_ADD_DEV", ctrlOp(cmdAddDev), 0xc0207504},
		{"UBLK_U_CMD_START_DEV", ctrlOp(cmdStartDev), 0xc0207506},
		{"UBLK_U_IO_FETCH_REQ", ioOp(ioFetchReq), 0xc0107520},
		{"UBLK_U_IO_COMMIT_AND_FETCH_REQ", ioOp(ioCommitAndFetchReq), 0xc0107521},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if off := descOffset(1, 4096); off != 98304 {
		t.Errorf("queue 1's descriptors at %d, want 98304", off)
	}
}
