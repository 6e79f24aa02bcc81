// Package crilog keeps a container's output in the CRI log format, as the kubelet's runtimes
// write it: one record per line, `<RFC3339Nano time> <stdout|stderr> <P|F> <content>`, stdout
// and stderr in one file in the order they came. P marks a piece of a line (a line longer than
// MaxLineSize, or output that ended without a newline), F the piece that ends one. The
// reading side is the kubelet's own reader (k8s.io/cri-client/pkg/logs), which serves
// timestamps, since, tail and byte limits from these records.
package crilog

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
	"time"
)

// MaxLineSize is the longest content of one record, containerd's default
// (max_container_log_line_size): a longer line is split into partial records.
const MaxLineSize = 16 << 10

// Stream names, as the CRI spells them.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Tags of a record: a partial line or the end of one.
const (
	tagPartial = 'P'
	tagFull    = 'F'
)

// File writes records of several streams to one destination, each record in one Write, so
// lines of stdout and stderr interleave whole and in time order.
type File struct {
	mu  sync.Mutex
	dst io.Writer
	now func() time.Time
	buf []byte
	err error // the first write error
}

// NewFile writes records to dst, each stamped with now().
func NewFile(dst io.Writer, now func() time.Time) *File {
	return &File{dst: dst, now: now}
}

// Copy writes src's lines as records of stream until src ends. A write that fails does not
// stop the copy: the container must never block on a full pipe because its log cannot be
// written (a full disk), so its output is dropped and the first error returned at the end.
func (f *File) Copy(stream string, src io.Reader) error {
	r := bufio.NewReaderSize(src, MaxLineSize)
	for {
		line, err := r.ReadSlice('\n')
		switch {
		case err == nil:
			f.record(stream, tagFull, line[:len(line)-1])
		case len(line) > 0:
			f.record(stream, tagPartial, line) // full buffer, or the end without a newline
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return errors.Join(err, f.writeErr())
		}
	}
}

// CopyAsRead writes src's output as each read returns it: its complete lines as full records
// and a line still open at the end of the read at once, as a partial record. A terminal's
// prompt ends no line, and a client attached to the terminal must see it before the user
// types; the log reads the same either way (a partial record joins the next).
func (f *File) CopyAsRead(stream string, src io.Reader) error {
	buf := make([]byte, MaxLineSize)
	for {
		n, err := src.Read(buf)
		for data := buf[:n]; len(data) > 0; {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				f.record(stream, tagPartial, data)
				break
			}
			f.record(stream, tagFull, data[:i])
			data = data[i+1:]
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return errors.Join(err, f.writeErr())
		}
	}
}

func (f *File) writeErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func (f *File) record(stream string, tag byte, content []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.now().UTC().AppendFormat(f.buf[:0], time.RFC3339Nano)
	b = append(b, ' ')
	b = append(b, stream...)
	b = append(b, ' ', tag, ' ')
	b = append(b, content...)
	b = append(b, '\n')
	f.buf = b
	if _, err := f.dst.Write(b); err != nil && f.err == nil {
		f.err = err
	}
}
