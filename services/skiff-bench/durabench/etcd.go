package durabench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/skiff-sh/skiff/services/skiff-bench/benchutil"
)

// etcdVersion is the etcd the comparison runs, as etcdload/go.mod requires it.
const etcdVersion = "v3.6.8"

type etcdBins struct{ server, load string }

// buildEtcd builds etcd and the load generator from the etcdload module once per version
// into the user's cache dir.
func buildEtcd(ctx context.Context) (etcdBins, error) {
	bins, err := benchutil.BuildFromModule(ctx, filepath.Join("services", "skiff-bench", "durabench", "etcdload"), "etcd-"+etcdVersion,
		map[string]string{"etcd": "go.etcd.io/etcd/server/v3", "etcdload": "."})
	if err != nil {
		return etcdBins{}, err
	}
	return etcdBins{server: bins["etcd"], load: bins["etcdload"]}, nil
}

// startEtcd runs a one-member etcd with its data in dir (fsync on, as etcd always does) and
// returns its client endpoint once it serves clients.
func startEtcd(ctx context.Context, bin, dir string) (endpoint string, stop func(), err error) {
	cport, err := benchutil.FreePort()
	if err != nil {
		return "", nil, err
	}
	pport, err := benchutil.FreePort()
	if err != nil {
		return "", nil, err
	}
	client := "http://127.0.0.1:" + strconv.Itoa(cport)
	peer := "http://127.0.0.1:" + strconv.Itoa(pport)
	cmd := exec.CommandContext(ctx, bin, "--name", "bench", "--data-dir", dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "bench="+peer, "--log-outputs", "stderr")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "ready to serve client requests") {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case <-ready:
		return client, stop, nil
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	stop()
	return "", nil, errors.New("etcd did not get ready in 30s")
}

// etcdRate runs the load generator against endpoint and returns writes/s.
func etcdRate(ctx context.Context, bins etcdBins, endpoint, prefix string, workers int, create bool) (float64, error) {
	cmd := exec.CommandContext(ctx, bins.load, "-endpoint", endpoint, "-workers", strconv.Itoa(workers),
		"-duration", runFor.String(), "-value-size", strconv.Itoa(valueSize), "-prefix", prefix,
		"-create="+strconv.FormatBool(create))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("etcdload: %w", err)
	}
	var r struct{ Ops, Seconds float64 }
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, fmt.Errorf("etcdload output %q: %w", out, err)
	}
	return r.Ops / r.Seconds, nil
}
