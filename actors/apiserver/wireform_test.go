package apiserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/skiff-sh/skiff/actors/apiwire"
	"github.com/skiff-sh/skiff/bus/rpc"
)

// The apiserver reads either envelope over NATS and answers in the one it was asked in.
func TestWireAnswersInTheRequestsForm(t *testing.T) {
	a := newLocalAPI(t, nil).start(t)
	ctx := context.Background()
	req := func(name string) apiwire.Request {
		return apiwire.Request{Method: http.MethodPost, Path: "/api/v1/namespaces", ContentType: "application/json", Body: namespaceJSON(name)}
	}

	old, _ := json.Marshal(req("json-envelope"))
	out, _, err := rpc.Call(ctx, a.nc, apiwire.Subject, old, nil)
	if err != nil {
		t.Fatal(err)
	}
	var resp apiwire.Response
	if err := json.Unmarshal(out, &resp); err != nil || resp.Code != http.StatusCreated {
		t.Fatalf("JSON request answered %q (%v), want a JSON 201", out, err)
	}

	out, _, err = rpc.Call(ctx, a.nc, apiwire.Subject, apiwire.EncodeRequest(req("binary-envelope")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if json.Valid(out) {
		t.Fatalf("binary request answered in JSON: %s", out)
	}
	if resp, err = apiwire.DecodeResponse(out); err != nil || resp.Code != http.StatusCreated {
		t.Fatalf("binary request answered %+v, %v; want 201", resp, err)
	}
	var ns struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	if err := json.Unmarshal(resp.Body, &ns); err != nil || ns.Metadata.Name != "binary-envelope" {
		t.Fatalf("binary answer's body %s (%v)", resp.Body, err)
	}

	if _, _, err := rpc.Call(ctx, a.nc, apiwire.Subject, []byte{0x01, 9}, nil); err == nil {
		t.Fatal("a truncated binary envelope was served")
	}
}
