package swapdev

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// watch, when S4D_SWAP_WATCH names an interval, writes the swap
// devices' counters and where each of the daemon's threads waits in the
// kernel to stderr at that interval: for finding a stall under memory
// pressure. Its goroutine runs Go, whose memory is not locked: a stall
// deep enough may stop it too.
func (s *Set) watch() {
	every, err := time.ParseDuration(os.Getenv("S4D_SWAP_WATCH"))
	if err != nil || every <= 0 {
		return
	}
	go func() {
		var b strings.Builder
		for n := 0; ; n++ {
			time.Sleep(every)
			b.Reset()
			for _, sd := range s.List() {
				fmt.Fprintf(&b, "swap-watch %s requests=%d waits=%d write_pages=%d read_pages=%d errors=%d pages=%d\n",
					sd.Name, sd.Requests, sd.Waits, sd.WritePgs, sd.ReadPgs, sd.Errors, sd.Pages)
			}
			tasks, _ := filepath.Glob("/proc/self/task/*")
			for _, t := range tasks {
				wchan, _ := os.ReadFile(t + "/wchan")
				stat, _ := os.ReadFile(t + "/stat")
				st := string(stat)
				if i := strings.LastIndexByte(st, ')'); i > 0 && len(st) > i+3 {
					st = st[i+2 : i+3]
				}
				fmt.Fprintf(&b, "swap-watch task %s %s wchan=%s\n", filepath.Base(t), st, wchan)
				if n > 0 {
					stack, _ := os.ReadFile(t + "/stack")
					b.Write(stack)
				}
			}
			os.Stderr.WriteString(b.String())
		}
	}()
}
