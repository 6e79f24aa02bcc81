package apiserver_test

import (
	"strings"
	"testing"
)

// Streams a request cannot have are refused naming the parameter, before any node is asked.
func TestStreamingRequestsRefuseWhatTheyCannotServe(t *testing.T) {
	a, _ := newAPI(t)
	a.mustDo(201, "POST", podsPath, "application/json", podJSON("p", ""))
	pod := podsPath + "/p"
	for _, c := range []struct{ method, path, field string }{
		{"POST", pod + "/exec?command=ls&tty=true&stdout=true", "tty: "},
		{"POST", pod + "/exec?command=ls&stdin=maybe", "stdin: "},
		{"GET", pod + "/attach?stdout=false", "stdin, stdout, stderr: "},
		{"POST", pod + "/exec?stdout=true", "command: "},
		{"GET", pod + "/portforward?ports=80", "port-forward needs a streaming connection"},
		{"GET", pod + "/log?timestamps=sometimes", "timestamps: "},
		{"GET", pod + "/log?sinceSeconds=ten", "sinceSeconds: "},
		{"GET", pod + "/log?sinceTime=yesterday", "sinceTime: "},
		{"GET", pod + "/log?stream=Stderr", "stream: "},
	} {
		code, out := a.do(c.method, c.path, "", "")
		if msg, _ := out["message"].(string); code != 400 || !strings.HasPrefix(msg, c.field) {
			t.Errorf("%s %s: got %d %q, want 400 starting %q", c.method, c.path, code, msg, c.field)
		}
	}
}

// Attach takes stdin only from a container created with it; the terminal is the container's
// choice, not the request's, so tty=true is no refusal; without an upgrade nothing streams.
func TestAttachChecksTheContainer(t *testing.T) {
	a, _ := newAPI(t)
	a.mustDo(201, "POST", podsPath, "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"run"},"spec":{"nodeName":"n1","containers":[{"name":"plain","image":"img"},{"name":"reads","image":"img","stdin":true,"tty":true}]}}`)
	attach := podsPath + "/run/attach?stdout=true&"
	for _, c := range []struct{ query, want string }{
		{"stdin=true&container=plain", `stdin: container "plain" was created without stdin`},
		{"stdin=true&container=reads", "attach needs a streaming connection"},
		{"tty=true&container=plain", "attach needs a streaming connection"},
		{"container=plain", "attach needs a streaming connection"},
		{"container=nope", "container nope is not valid for pod run"},
	} {
		code, out := a.do("GET", attach+c.query, "", "")
		if msg, _ := out["message"].(string); code != 400 || !strings.HasPrefix(msg, c.want) {
			t.Errorf("attach?%s: got %d %q, want 400 starting %q", c.query, code, msg, c.want)
		}
	}
}

// pods/log options kube-apiserver's validation refuses are 422 Invalid naming the field, with
// its messages, before any node is asked.
func TestPodLogOptionsValidatedAsKube(t *testing.T) {
	a, _ := newAPI(t)
	a.mustDo(201, "POST", podsPath, "application/json", podJSON("p", ""))
	for query, want := range map[string]string{
		"limitBytes=0":    `PodLogOptions "p" is invalid: limitBytes: Invalid value: 0: must be greater than 0`,
		"tailLines=-1":    `PodLogOptions "p" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0`,
		"sinceSeconds=-5": `PodLogOptions "p" is invalid: sinceSeconds: Invalid value: -5: must be greater than 0`,
		"sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z": "PodLogOptions \"p\" is invalid: []: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified",
	} {
		code, out := a.do("GET", podsPath+"/p/log?"+query, "", "")
		if msg, _ := out["message"].(string); code != 422 || msg != want {
			t.Errorf("%s: got %d %q, want 422 %q", query, code, msg, want)
		}
	}
	// Valid options pass validation: this pod is not scheduled, which is the next check.
	code, out := a.do("GET", podsPath+"/p/log?timestamps=true&sinceSeconds=10&tailLines=0&limitBytes=1", "", "")
	if msg, _ := out["message"].(string); code != 400 || !strings.Contains(msg, "not scheduled") {
		t.Errorf("valid options: got %d %q, want 400 not scheduled", code, msg)
	}
}

// A finished pod runs nothing to exec into or attach to: 400 with kube-apiserver's message.
func TestExecAndAttachRefuseACompletedPod(t *testing.T) {
	a, _ := newAPI(t)
	a.mustDo(201, "POST", podsPath, "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"done"},"spec":{"nodeName":"n1","containers":[{"name":"c","image":"img"}]}}`)
	a.mustDo(200, "PATCH", podsPath+"/done/status", "application/merge-patch+json", `{"status":{"phase":"Succeeded"}}`)
	code, out := a.do("POST", podsPath+"/done/exec?command=ls&stdout=true", "", "")
	want := "cannot exec into a container in a completed pod; current phase is Succeeded"
	if msg, _ := out["message"].(string); code != 400 || msg != want {
		t.Errorf("exec in a Succeeded pod: got %d %q, want 400 %q", code, msg, want)
	}
}
