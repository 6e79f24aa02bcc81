package apiwire

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
)

// The binary envelope: the JSON one base64-encodes the body (a third more bytes, and encoding
// and decoding it both ways was a share of every NATS call's cost). A binary envelope starts
// with its version byte, which no JSON text starts with, so a server tells the two apart and
// answers in the form it was asked in.
//
//	request:  version, method, path, content type, header count, (key, value)..., body
//	response: version, code, body
//
// Strings are a uvarint length and the bytes; counts and the code are uvarints; the body is
// the rest of the message, raw.
const binaryV1 byte = 0x01

// Form is how an envelope is encoded.
type Form uint8

const (
	FormJSON Form = iota
	FormBinary
)

// maxCode bounds a response's status code (HTTP's are three digits).
const maxCode = 999

// EncodeRequest is req in the binary envelope.
func EncodeRequest(req Request) []byte {
	n := 1 + 3*binary.MaxVarintLen64 + len(req.Method) + len(req.Path) + len(req.ContentType) + len(req.Body)
	for k, v := range req.Header {
		n += 2*binary.MaxVarintLen64 + len(k) + len(v)
	}
	out := append(make([]byte, 0, n), binaryV1)
	out = appendString(appendString(appendString(out, req.Method), req.Path), req.ContentType)
	out = binary.AppendUvarint(out, uint64(len(req.Header)))
	keys := make([]string, 0, len(req.Header))
	for k := range req.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys) // one request, one encoding
	for _, k := range keys {
		out = appendString(appendString(out, k), req.Header[k])
	}
	return append(out, req.Body...)
}

// DecodeRequest reads a request in either envelope and says which. Its Body aliases data.
func DecodeRequest(data []byte) (Request, Form, error) {
	var req Request
	if len(data) == 0 || data[0] != binaryV1 {
		if err := json.Unmarshal(data, &req); err != nil {
			return Request{}, FormJSON, fmt.Errorf("apiwire: request: %w", err)
		}
		return req, FormJSON, nil
	}
	d := decoder{data: data[1:]}
	req.Method, req.Path, req.ContentType = d.string("method"), d.string("path"), d.string("contentType")
	n := d.uvarint("header count")
	if d.err == nil && n > uint64(len(d.data)/2) { // each entry takes at least two length bytes
		d.fail("header count", "%d entries in %d bytes", n, len(d.data))
	}
	if d.err == nil && n > 0 {
		req.Header = make(map[string]string, n)
		for i := uint64(0); i < n && d.err == nil; i++ {
			k, v := d.string("header key"), d.string("header value")
			if _, dup := req.Header[k]; dup && d.err == nil {
				d.fail("header key", "%q given twice", k)
			}
			req.Header[k] = v
		}
	}
	if d.err != nil {
		return Request{}, FormBinary, d.err
	}
	if len(d.data) > 0 {
		req.Body = d.data
	}
	return req, FormBinary, nil
}

// EncodeResponse is resp in form.
func EncodeResponse(resp Response, form Form) []byte {
	if form == FormJSON {
		out, _ := json.Marshal(resp)
		return out
	}
	out := append(make([]byte, 0, 1+binary.MaxVarintLen64+len(resp.Body)), binaryV1)
	out = binary.AppendUvarint(out, uint64(max(resp.Code, 0)))
	return append(out, resp.Body...)
}

// DecodeResponse reads a response in either envelope. Its Body aliases data.
func DecodeResponse(data []byte) (Response, error) {
	var resp Response
	if len(data) == 0 || data[0] != binaryV1 {
		if err := json.Unmarshal(data, &resp); err != nil {
			return Response{}, fmt.Errorf("apiwire: response: %w", err)
		}
		if resp.Code < 0 || resp.Code > maxCode {
			return Response{}, fmt.Errorf("apiwire: response: code: %d is no status code", resp.Code)
		}
		return resp, nil
	}
	d := decoder{data: data[1:]}
	code := d.uvarint("code")
	if d.err == nil && code > maxCode {
		d.fail("code", "%d is no status code", code)
	}
	if d.err != nil {
		return Response{}, d.err
	}
	resp.Code = int(code)
	if len(d.data) > 0 {
		resp.Body = d.data
	}
	return resp, nil
}

func appendString(out []byte, s string) []byte {
	return append(binary.AppendUvarint(out, uint64(len(s))), s...)
}

// decoder reads fields off data; the first error sticks and names its field.
type decoder struct {
	data []byte
	err  error
}

func (d *decoder) fail(field, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("apiwire: binary envelope: %s: %s", field, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.data)
	if n <= 0 {
		d.fail(field, "not a uvarint (truncated or too long)")
		return 0
	}
	d.data = d.data[n:]
	return v
}

func (d *decoder) string(field string) string {
	n := d.uvarint(field)
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.data)) {
		d.fail(field, "length %d, %d bytes left", n, len(d.data))
		return ""
	}
	s := string(d.data[:n])
	d.data = d.data[n:]
	return s
}
