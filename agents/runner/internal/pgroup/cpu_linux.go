package pgroup

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of the CPU times in /proc/PID/stat (USER_HZ,
// which Linux fixes at 100 for user space on every architecture it runs
// GPUs on).
const clockTick = 10 * time.Millisecond

// CPUTime is the CPU time, user and system, that the group's processes
// have used so far, and that of their children they have waited for; ok
// is false when none of them could be read. It reads every process of
// /proc once, so it is for sampling every few seconds, not per request.
func (p *Proc) CPUTime() (time.Duration, bool) {
	des, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var ticks uint64
	found := false
	for _, de := range des {
		if _, err := strconv.Atoi(de.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + de.Name() + "/stat")
		if err != nil {
			continue // gone since the listing
		}
		// Fields are counted after the command name's last ')', which
		// may hold spaces: state is the first, the group the third,
		// utime, stime, cutime and cstime the 12th to 15th.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 15 {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err != nil || g != p.pgid {
			continue
		}
		for _, v := range f[11:15] {
			n, err := strconv.ParseUint(v, 10, 64)
			if err == nil {
				ticks += n
			}
		}
		found = true
	}
	return time.Duration(ticks) * clockTick, found
}
