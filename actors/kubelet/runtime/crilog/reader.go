package crilog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
)

// ErrNoTimes refuses a read by time from a log written before records carried their time.
var ErrNoTimes = errors.New("this container's log was written before each line carried its time (it started before the node kept logs in the CRI format), so timestamps, sinceSeconds and sinceTime cannot be served for it")

// NewOptions are the kubelet's read options for a pods/log request received at now: since
// is the later of sinceSeconds before now and sinceTime.
func NewOptions(o *corev1.PodLogOptions, now time.Time) *logs.LogOptions {
	opts := &logs.LogOptions{TailLines: o.TailLines, LimitBytes: o.LimitBytes, Follow: o.Follow, Timestamp: o.Timestamps}
	if o.SinceSeconds != nil {
		opts.Since = now.Add(-time.Duration(*o.SinceSeconds) * time.Second)
	}
	if o.SinceTime != nil && o.SinceTime.After(opts.Since) {
		opts.Since = o.SinceTime.Time
	}
	return opts
}

// Running says whether the container still writes its log: a follow ends once it does not.
type Running func(ctx context.Context) (bool, error)

// Log is one container attempt's log file, checked to serve a read.
type Log struct {
	path  string
	plain bool // written before the CRI format: output without records
	opts  *logs.LogOptions
}

// Open checks that the log at path can serve opts. A log from before the CRI format (plain
// output) still serves tail, byte limits and follow, but not times: those are refused.
func Open(path string, opts *logs.LogOptions) (*Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, 128)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	l := &Log{path: path, plain: n > 0 && !IsRecord(head[:n]), opts: opts}
	if l.plain && (opts.Timestamp || !opts.Since.IsZero()) {
		return nil, ErrNoTimes
	}
	return l, nil
}

// Copy writes the log's lines to stdout and stderr as kubectl logs shows them (one writer
// for both keeps them in the order they were written), following it while running says so
// when the options follow. A plain log goes to stdout whole.
func (l *Log) Copy(ctx context.Context, running Running, stdout, stderr io.Writer) error {
	if l.plain {
		return copyPlain(ctx, l.path, l.opts, running, stdout)
	}
	return logs.ReadLogs(ctx, l.path, "", l.opts, containerState{running: running}, stdout, stderr)
}

// IsRecord says whether b starts with a CRI log record's time, stream and tag.
func IsRecord(b []byte) bool {
	ts, rest, ok := bytes.Cut(b, []byte{' '})
	if !ok {
		return false
	}
	if _, err := time.Parse(logs.RFC3339NanoLenient, string(ts)); err != nil {
		return false
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != Stdout && string(stream) != Stderr) {
		return false
	}
	tags, _, ok := bytes.Cut(rest, []byte{' '})
	if !ok || len(tags) == 0 {
		return false
	}
	tag, _, _ := bytes.Cut(tags, []byte(runtimeapi.LogTagDelimiter))
	return string(tag) == string(runtimeapi.LogTagPartial) || string(tag) == string(runtimeapi.LogTagFull)
}

// containerState is the one question the kubelet's log reader asks its runtime while it
// follows a log: whether the container still runs. ReadLogs takes the CRI's whole
// RuntimeService for it; the embedded interface is nil, so any other call would panic, and
// ReadLogs makes none.
type containerState struct {
	internalapi.RuntimeService
	running Running
}

var _ internalapi.RuntimeService = containerState{}

func (c containerState) ContainerStatus(ctx context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	ok, err := c.running(ctx)
	if err != nil {
		return nil, fmt.Errorf("container state: %w", err)
	}
	state := runtimeapi.ContainerState_CONTAINER_EXITED
	if ok {
		state = runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, State: state}}, nil
}
