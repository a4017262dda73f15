package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

const netnsDir = "/run/netns"

// Teardown undoes everything a node recorded in stateDir and is a no-op
// on a clean machine. In order: containerd's tasks and containers are
// killed and deleted while it still answers; recorded processes are
// stopped (the policy agent first, with SIGINT); shims of this node's
// containerd and their containers are killed; then, if the state is from
// this boot: pod netns are unmounted and deleted; the bridge, pod veths,
// nft tables and ipsets absent from the baseline are deleted; and the recorded sysctls
// restored; the node's cgroups are removed; every mount under the node's
// paths is detached; the paths absent from the baseline and the work dir
// are removed; the state file goes last, so a failed teardown is retried
// by the next one. Without a state file only <stateDir>/work is touched
// (the state file is written before anything changes, so nothing else
// can be ours). Errors are joined; each step still runs.
func Teardown(ctx context.Context, stateDir string, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	logf := func(f string, a ...any) { fmt.Fprintf(progress, "teardown: "+f+"\n", a...) }
	st, err := loadState(stateDir)
	if err != nil {
		return err
	}
	workDir := filepath.Join(stateDir, "work")
	if st != nil && st.WorkDir != "" {
		workDir = st.WorkDir
	}
	socket := containerdPaths(workDir).Socket
	var errs []error
	note := func(err error) {
		if err != nil {
			logf("error: %v", err)
			errs = append(errs, err)
		}
	}

	sameBoot := st != nil && st.BootID == bootID()
	if st != nil && !sameBoot {
		logf("state is from an earlier boot: kernel state already reset, cleaning paths only")
	}
	removeContainers(ctx, socket, logf)
	if sameBoot {
		// Start times in pid files count from this boot.
		note(stopPidFiles(stateDir, 10*time.Second, logf))
	}
	_ = os.RemoveAll(pidDir(stateDir))
	killShims(socket, logf)
	deleteGuardNetns(ctx) // VerifyGuard's, named as ours
	if sameBoot {
		for _, n := range netnsNames() {
			if !slices.Contains(st.Netns, n) {
				p := filepath.Join(netnsDir, n)
				logf("deleting netns %s", n)
				_ = syscall.Unmount(p, syscall.MNT_DETACH)
				note(os.Remove(p))
			}
		}
		for _, l := range links() {
			// Only the bridge and pod veths: a link someone else adds
			// meanwhile is not ours.
			if !slices.Contains(st.Links, l) && (l == Bridge || strings.HasPrefix(l, "veth")) {
				logf("deleting link %s", l)
				if _, err := run(ctx, "ip", "link", "del", l); err != nil && linkExists(l) {
					note(err) // a veth peer goes with its netns
				}
			}
		}
	}
	note(deleteTables(ctx, st, sameBoot, logf))
	if sameBoot {
		for _, s := range ipsets(ctx) {
			if !slices.Contains(st.IPSets, s) {
				logf("destroying ipset %s", s)
				_, err := run(ctx, "ipset", "destroy", s)
				note(err)
			}
		}
		note(restoreSysctls(st.Sysctls, logf))
	}
	if st != nil {
		for _, d := range cgroupDirs() {
			if !slices.Contains(st.Cgroups, d) {
				note(removeCgroup(d, logf))
			}
		}
	}

	var paths []string
	if st != nil {
		for _, p := range FixedPaths {
			if !slices.Contains(st.Paths, p) {
				paths = append(paths, p)
			}
		}
	}
	paths = append(paths, workDir)
	note(removePaths(paths, logf))
	if err := os.Remove(statePath(stateDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		note(err)
	}
	if len(errs) == 0 {
		_ = os.Remove(stateDir) // only if empty
	}
	return errors.Join(errs...)
}

// removeContainers force-deletes every task and container in every
// namespace of the containerd on socket, if it answers (this unmounts
// their root filesystems cleanly).
func removeContainers(ctx context.Context, socket string, logf func(string, ...any)) {
	if _, err := os.Stat(socket); err != nil {
		return
	}
	ctr := func(args ...string) ([]byte, error) {
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return run(c, "ctr", append([]string{"-a", socket}, args...)...)
	}
	nss, err := ctr("namespaces", "list", "-q")
	if err != nil {
		return
	}
	for _, ns := range strings.Fields(string(nss)) {
		ids, _ := ctr("-n", ns, "containers", "list", "-q")
		for _, id := range strings.Fields(string(ids)) {
			logf("deleting container %s/%s", ns, id)
			_, _ = ctr("-n", ns, "tasks", "delete", "--force", id)
			_, _ = ctr("-n", ns, "containers", "delete", id)
		}
	}
}

// deleteTables deletes the nft tables absent from the baseline of this
// boot (the guard table among them). The state file is written before the
// guard table, so without it there is no table of ours.
func deleteTables(ctx context.Context, st *state, sameBoot bool, logf func(string, ...any)) error {
	if !sameBoot {
		return nil // no state of this boot: no table of ours can exist
	}
	tables, err := nftTables(ctx)
	if err != nil {
		return nil // nft not installed: nothing of ours can exist
	}
	var errs []error
	for _, t := range tables {
		if slices.Contains(st.Tables, t) {
			continue
		}
		logf("deleting nft table %s", t)
		if _, err := run(ctx, "nft", append([]string{"delete", "table"}, strings.Fields(t)...)...); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func restoreSysctls(orig map[string]string, logf func(string, ...any)) error {
	var errs []error
	names := make([]string, 0, len(orig))
	for n := range orig {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(sysctlPath(n))
		if err != nil || strings.TrimSpace(string(b)) == orig[n] {
			continue
		}
		logf("restoring %s = %s (was %s)", n, orig[n], strings.TrimSpace(string(b)))
		if err := os.WriteFile(sysctlPath(n), []byte(orig[n]), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

func linkExists(name string) bool {
	_, err := os.Lstat(filepath.Join("/sys/class/net", name))
	return err == nil
}

func netnsNames() []string {
	ents, _ := os.ReadDir(netnsDir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// cgroupDirs returns the directories named in Cgroups directly under each
// mounted cgroup hierarchy (v1 controllers and v2).
func cgroupDirs() []string {
	var out []string
	for _, m := range mountPoints() {
		if !strings.HasPrefix(m, "/sys/fs/cgroup") {
			continue
		}
		for _, c := range Cgroups {
			if fi, err := os.Stat(filepath.Join(m, c)); err == nil && fi.IsDir() {
				out = append(out, filepath.Join(m, c))
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// removeCgroup removes a cgroup tree bottom-up with rmdir (the only way:
// cgroupfs files cannot be unlinked); a cgroup with live tasks stays and
// is reported.
func removeCgroup(dir string, logf func(string, ...any)) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	logf("removing cgroup %s (%d groups)", dir, len(dirs))
	var last error
	for i := len(dirs) - 1; i >= 0; i-- {
		for try := 0; try < 20; try++ {
			if last = syscall.Rmdir(dirs[i]); last == nil || errors.Is(last, os.ErrNotExist) {
				last = nil
				break
			}
			time.Sleep(50 * time.Millisecond) // tasks just killed may linger briefly
		}
		if last != nil {
			return fmt.Errorf("rmdir %s: %w", dirs[i], last)
		}
	}
	return nil
}

// mountPoints returns every mount point of this mount namespace.
func mountPoints() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out
}

func unescapeMount(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// removePaths detaches every mount under paths (deepest first), then
// removes the paths; a path that still has a mount under it is not
// removed (os.RemoveAll would cross into the mounted file system).
func removePaths(paths []string, logf func(string, ...any)) error {
	var errs []error
	for try := 0; try < 3; try++ {
		var mounted []string
		for _, m := range mountPoints() {
			for _, p := range paths {
				if under(m, p) {
					mounted = append(mounted, m)
				}
			}
		}
		if len(mounted) == 0 {
			break
		}
		sort.Sort(sort.Reverse(sort.StringSlice(mounted)))
		for _, m := range slices.Compact(mounted) {
			logf("unmounting %s", m)
			_ = syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	mps := mountPoints()
	for _, p := range paths {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if i := slices.IndexFunc(mps, func(m string) bool { return under(m, p) }); i >= 0 {
			errs = append(errs, fmt.Errorf("not removing %s: %s is still mounted", p, mps[i]))
			continue
		}
		logf("removing %s", p)
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
