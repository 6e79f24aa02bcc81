package stream

import (
	"bytes"
	"testing"
)

// Any bytes decode to a frame that encodes back to the same bytes, or to an error.
func FuzzDecode(f *testing.F) {
	f.Add(Frame{Kind: Data, Channel: 1, Seq: 7, Payload: []byte("hi")}.Encode())
	f.Add(Frame{Kind: Credit, Seq: 1, Payload: uint32Payload(1 << 20)}.Encode())
	f.Add(Frame{Kind: Exit, Seq: 9, Payload: exitPayload(-1, "boom")}.Encode())
	f.Add(Frame{Kind: Resize, Seq: 2, Payload: resizePayload(Size{80, 24})}.Encode())
	f.Add([]byte{byte(Close), 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := Decode(b)
		if err != nil {
			return
		}
		if !bytes.Equal(fr.Encode(), b) {
			t.Fatalf("decode(%x) = %+v encodes to %x", b, fr, fr.Encode())
		}
	})
}

func TestDecodeRefusesMalformedFrames(t *testing.T) {
	for name, b := range map[string][]byte{
		"short":              {byte(Data), 0, 0, 0},
		"unknown kind":       Frame{Kind: 99, Seq: 1}.Encode(),
		"credit of 3 bytes":  Frame{Kind: Credit, Seq: 1, Payload: []byte{1, 2, 3}}.Encode(),
		"close with payload": Frame{Kind: Close, Seq: 1, Payload: []byte{1}}.Encode(),
		"exit without code":  Frame{Kind: Exit, Seq: 1, Payload: []byte{1}}.Encode(),
	} {
		if _, err := Decode(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
