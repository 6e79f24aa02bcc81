package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// runInteractive is a tiny line-oriented program for exec tests: it says whether stdin is a
// terminal and its size, then answers each line as it arrives ("size" with the current size,
// "exit N" by exiting N, anything else echoed back), so a test sees output live and resizes.
func runInteractive(in io.Reader, out io.Writer) int {
	fmt.Fprintf(out, "tty=%v %s\n", isTerminal(), termSize())
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "size":
			fmt.Fprintln(out, termSize())
		case strings.HasPrefix(line, "exit "):
			code, err := strconv.Atoi(strings.TrimPrefix(line, "exit "))
			if err != nil {
				fmt.Fprintln(out, "exit needs a number")
				continue
			}
			return code
		default:
			fmt.Fprintf(out, "echo: %s\n", line)
		}
	}
	return 0
}

func isTerminal() bool {
	_, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS)
	return err == nil
}

func termSize() string {
	ws, err := unix.IoctlGetWinsize(int(os.Stdin.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return "size=none"
	}
	return fmt.Sprintf("size=%dx%d", ws.Col, ws.Row)
}
