package crilog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/runtime/v2/logging"
)

// LoggerName is the node binary's entry that containerd's shim starts as a container's
// logging binary: it holds the container's stdout and stderr pipes and writes them to the
// log file. As a child of the shim it outlives an agent restart, as the shim's own file
// logging did.
const LoggerName = "skiff-cri-logger"

// LoggerPathArg is the argument (the shim passes the logging URI's query as `key value`)
// naming the log file.
const LoggerPathArg = "--log-path"

// LoggerMain runs the logging binary; it does not return (containerd's logging.Run exits).
func LoggerMain() int {
	logging.Run(func(_ context.Context, cfg *logging.Config, ready func() error) error {
		path, err := loggerPath(os.Args[1:])
		if err != nil {
			return err // before ready: the shim fails the task's start
		}
		out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
		if err != nil {
			return err
		}
		defer out.Close()
		if err := ready(); err != nil {
			return err
		}
		// The shim closes the pipes when the container ends, then sends SIGTERM; the
		// copies end at the pipes' EOF, so nothing written before is lost.
		return copyStreams(NewFile(out, time.Now), cfg)
	})
	return 0
}

func copyStreams(f *File, cfg *logging.Config) error {
	var wg sync.WaitGroup
	var outErr, errErr error
	wg.Go(func() { outErr = f.Copy(Stdout, cfg.Stdout) })
	wg.Go(func() { errErr = f.Copy(Stderr, cfg.Stderr) })
	wg.Wait()
	return errors.Join(outErr, errErr)
}

func loggerPath(args []string) (string, error) {
	if len(args) != 2 || args[0] != LoggerPathArg || args[1] == "" {
		return "", fmt.Errorf("%s: want %s FILE, got %q", LoggerName, LoggerPathArg, args)
	}
	return args[1], nil
}

// RunIfLogger runs the logging binary when this process was started as it, and otherwise
// returns: a test binary linked as the logger (nodebintest.CarryLogger) calls it first in
// TestMain, as skiff's main calls nodebin.Run.
func RunIfLogger() {
	if filepath.Base(os.Args[0]) == LoggerName {
		os.Exit(LoggerMain())
	}
}
