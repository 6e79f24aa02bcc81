package qemuvm

import (
	"fmt"
	"io"
	"strings"
)

// cpioWriter writes the "newc" cpio format the kernel unpacks an initramfs from: a 110-byte
// ASCII header per entry, the NUL-terminated name and the data, each padded to 4 bytes.
type cpioWriter struct {
	w   io.Writer
	off int64
	ino int
	err error
}

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.off += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.off % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// entry writes one header and name; the caller then writes size bytes of data with body.
func (c *cpioWriter) entry(name string, mode uint32, size int64, body func(io.Writer) error) {
	c.ino++
	name = strings.TrimPrefix(name, "/")
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write(append([]byte(name), 0))
	c.pad()
	if body != nil && c.err == nil {
		before := c.off
		cw := &countWriter{c: c}
		if err := body(cw); err != nil && c.err == nil {
			c.err = fmt.Errorf("%s: %w", name, err)
		}
		if c.err == nil && c.off-before != size {
			c.err = fmt.Errorf("%s: wrote %d bytes, header says %d", name, c.off-before, size)
		}
	}
	c.pad()
}

// close writes the trailer entry that ends the archive.
func (c *cpioWriter) close() error {
	c.entry("TRAILER!!!", 0, 0, nil)
	return c.err
}

type countWriter struct{ c *cpioWriter }

func (w *countWriter) Write(b []byte) (int, error) {
	w.c.write(b)
	return len(b), w.c.err
}
