package store

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// unmapFile removes this process's memory mappings of f's file. A panic
// inside bolt.Open leaves the file mapped with no *bolt.DB to unmap it,
// and the mapping keeps the open file, and so its flock, alive after the
// descriptor is closed: every later open then waits for a lock this
// process holds. Called only after such a panic, while db.mu is held.
func unmapFile(f *os.File) {
	fi, err := f.Stat()
	if err != nil {
		return
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer maps.Close()
	type span struct{ start, end uintptr }
	var spans []span
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[4] != strconv.FormatUint(st.Ino, 10) || fields[5] != f.Name() && !strings.HasSuffix(fields[5], "/"+fi.Name()) {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && end > start {
			spans = append(spans, span{uintptr(start), uintptr(end)})
		}
	}
	for _, s := range spans {
		_, _, _ = syscall.Syscall(syscall.SYS_MUNMAP, s.start, s.end-s.start, 0)
	}
}
