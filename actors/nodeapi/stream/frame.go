// Package stream carries one interactive session (exec, attach, port-forward) between the
// apiserver and a node over core NATS: numbered byte channels, each direction ordered by a
// sequence number and bounded by a credit window, so a slow reader slows its writer instead
// of making NATS drop messages.
package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kind is what a frame carries.
type Kind byte

const (
	// Data is bytes of one channel; they spend the sender's credit.
	Data Kind = iota + 1
	// Close ends one channel (EOF for its reader).
	Close
	// Credit lets the peer send this many more bytes (a uint32).
	Credit
	// Resize is a terminal size: width and height as uint16.
	Resize
	// Exit ends the session with an exit code (int32) and a message; sent by the node.
	Exit
	// Ping keeps an idle session alive.
	Ping
	// Reset aborts the session with a message.
	Reset
)

// headerLen is kind (1), channel (1) and sequence (8).
const headerLen = 10

// Frame is one NATS message of a session.
type Frame struct {
	Kind    Kind
	Channel byte
	Seq     uint64
	Payload []byte
}

// Encode is the frame's wire form.
func (f Frame) Encode() []byte {
	b := make([]byte, headerLen+len(f.Payload))
	b[0], b[1] = byte(f.Kind), f.Channel
	binary.BigEndian.PutUint64(b[2:], f.Seq)
	copy(b[headerLen:], f.Payload)
	return b
}

// Decode parses one frame, checking each kind's payload size. Payload aliases b.
func Decode(b []byte) (Frame, error) {
	if len(b) < headerLen {
		return Frame{}, fmt.Errorf("stream: frame of %d bytes is shorter than its %d-byte header", len(b), headerLen)
	}
	f := Frame{Kind: Kind(b[0]), Channel: b[1], Seq: binary.BigEndian.Uint64(b[2:]), Payload: b[headerLen:]}
	want := -1 // any length
	switch f.Kind {
	case Data, Reset:
	case Close, Ping:
		want = 0
	case Credit:
		want = 4
	case Resize:
		want = 4
	case Exit:
		if len(f.Payload) < 4 {
			return Frame{}, errors.New("stream: exit frame without its code")
		}
	default:
		return Frame{}, fmt.Errorf("stream: unknown frame kind %d", f.Kind)
	}
	if want >= 0 && len(f.Payload) != want {
		return Frame{}, fmt.Errorf("stream: frame kind %d carries %d bytes, want %d", f.Kind, len(f.Payload), want)
	}
	return f, nil
}

// Size is a terminal size.
type Size struct{ Width, Height uint16 }

func resizePayload(s Size) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint16(b, s.Width)
	binary.BigEndian.PutUint16(b[2:], s.Height)
	return b
}

func exitPayload(code int32, msg string) []byte {
	b := make([]byte, 4, 4+len(msg))
	binary.BigEndian.PutUint32(b, uint32(code))
	return append(b, msg...)
}

func uint32Payload(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
