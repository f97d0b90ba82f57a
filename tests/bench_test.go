package tests

import (
	"fmt"
	"testing"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/client"
)

// BenchmarkGetPath compares receiving pages through the socket with
// having the daemon write them into a memfd.
func BenchmarkGetPath(b *testing.B) {
	for _, n := range []int{16, 1024} {
		pages := corpus.Pages(corpus.Mixed, n, 4096, 1)
		ks := keys(0, n)
		setup := func(b *testing.B) *client.Client {
			c := &client.Client{Socket: start(b).socket}
			if _, err := c.Put(b.Context(), "bench", ks, pages); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(pages)))
			return c
		}
		b.Run(fmt.Sprint("copy/", n), func(b *testing.B) {
			c := setup(b)
			defer c.Close()
			for b.Loop() {
				if _, _, err := c.Get(b.Context(), "bench", ks); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprint("memfd/", n), func(b *testing.B) {
			c := setup(b)
			defer c.Close()
			buf, err := client.NewPageBuffer(len(pages))
			if err != nil {
				b.Fatal(err)
			}
			defer buf.Close()
			for b.Loop() {
				if _, err := c.GetBuffer(b.Context(), "bench", ks, buf, 0, 4096); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPutPath compares sending pages through the socket with handing
// them over in a memfd, end to end against the real daemon.
func BenchmarkPutPath(b *testing.B) {
	for _, n := range []int{1, 16, 1024} {
		pages := corpus.Pages(corpus.Mixed, n, 4096, 1)
		ks := keys(0, n)
		b.Run(fmt.Sprint("copy/", n), func(b *testing.B) {
			c := &client.Client{Socket: start(b).socket}
			defer c.Close()
			b.SetBytes(int64(len(pages)))
			for b.Loop() {
				if _, err := c.Put(b.Context(), "bench", ks, pages); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprint("memfd/", n), func(b *testing.B) {
			c := &client.Client{Socket: start(b).socket}
			defer c.Close()
			buf, err := client.NewPageBuffer(len(pages))
			if err != nil {
				b.Fatal(err)
			}
			defer buf.Close()
			copy(buf.Bytes(), pages)
			b.SetBytes(int64(len(pages)))
			for b.Loop() {
				if _, err := c.PutBuffer(b.Context(), "bench", ks, buf, 0, 4096); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
