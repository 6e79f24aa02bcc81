package runtime

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ReadStatKey is the number on the "key value" line of a kernel statistics file (memory.stat,
// memory.oom_control, cpu.stat, /proc/meminfo).
func ReadStatKey(file, key string) (uint64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == key {
			v, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %s: %w", file, key, err)
			}
			return v, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no %s", file, key)
}
