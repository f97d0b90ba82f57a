// lockwatch: a watcher that still runs when the guest stalls for memory.
//
//   lockwatch EVERY AT [PID [SIG]]
//
// Every EVERY seconds it prints memory and swap counters (lines starting
// "WATCH "); once, AT seconds in, it prints every thread of PID with its
// state, system call and kernel stack ("WATCH-TASK"), then asks the kernel
// for all tasks' stacks and its memory report (sysrq t and m; seen on the
// console with loglevel=7), and then sends PID signal SIG if given (3,
// SIGQUIT: a Go program prints every goroutine's stack). Build it static (cc -static) and start it
// before the pressure: it locks itself in memory and allocates nothing
// after, so it needs no page the stall holds back. A shell loop cannot
// do this: each command it forks needs fresh memory, and its program may
// have been swapped out to the very device that stalls (a loop beside
// the workload was enough to stall the guest, see README "Swap on s4d").
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static char buf[1 << 16];
static char dents[1 << 14];
static char out[4096];

// slurp reads an open /proc file from its start into buf; 0 bytes if it
// cannot. The files are opened once, at the start: an open at the stall
// needs a struct file from the slab allocator, which waits in reclaim
// with everyone else (seen: lockwatch itself hung in openat).
static int slurp(int fd) {
	int n = fd >= 0 ? pread(fd, buf, sizeof buf - 1, 0) : 0;
	if (n < 0)
		n = 0;
	buf[n] = 0;
	return n;
}

// keys prints the lines of path that start with one of keys, on one line.
static void keys(int fd, const char **keys) {
	int o = 0;
	slurp(fd);
	for (char *s = buf, *e; s && *s; s = e ? e + 1 : 0) {
		if ((e = strchr(s, '\n')))
			*e = 0;
		for (const char **k = keys; *k; k++)
			if (!strncmp(s, *k, strlen(*k)) && o < (int)sizeof out - 200)
				o += snprintf(out + o, sizeof out - o, "%s | ", s);
	}
	dprintf(1, "WATCH %.*s\n", o, out);
}

struct dirent64 {
	unsigned long long ino;
	long long off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

// The threads' files are opened, and read once, at the start: at the
// stall, a path lookup in /proc needs kernel memory (a dentry, an inode)
// and waits with the rest; an open seq_file read again from offset 0
// reuses its buffer.
enum { maxTasks = 128 };
static int taskFd[maxTasks][3], ntasks;
static const char *taskFile[3] = {"stat", "syscall", "stack"};

static void reread(int fd) {
	int n = pread(fd, buf, sizeof buf - 1, 0);
	buf[n > 0 ? n : 0] = 0;
}

// openTasks opens stat, syscall and stack of each thread of pid now.
static void openTasks(int pid) {
	char path[128];
	snprintf(path, sizeof path, "/proc/%d/task", pid);
	int fd = open(path, O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		dprintf(1, "WATCH-TASK none: %s\n", path);
		return;
	}
	long n;
	while ((n = syscall(SYS_getdents64, fd, dents, sizeof dents)) > 0) {
		for (long i = 0; i < n && ntasks < maxTasks;) {
			struct dirent64 *d = (struct dirent64 *)(dents + i);
			i += d->reclen;
			if (d->name[0] == '.')
				continue;
			for (int f = 0; f < 3; f++) {
				char p[192];
				snprintf(p, sizeof p, "%s/%s/%s", path, d->name, taskFile[f]);
				taskFd[ntasks][f] = open(p, O_RDONLY);
				if (taskFd[ntasks][f] >= 0)
					reread(taskFd[ntasks][f]);
			}
			ntasks++;
		}
	}
	close(fd);
}

// tasks prints each thread opened: its stat line, system call and stack.
static void tasks(void) {
	static const char *tag[3] = {"WATCH-TASK ", "WATCH-SYSCALL ", ""};
	for (int t = 0; t < ntasks; t++)
		for (int f = 0; f < 3; f++)
			if (taskFd[t][f] >= 0) {
				reread(taskFd[t][f]);
				dprintf(1, "%s%s", tag[f], buf);
			}
}

int main(int argc, char **argv) {
	if (argc < 3 || atoi(argv[1]) <= 0) {
		dprintf(2, "usage: lockwatch EVERY AT [PID [SIG]] (seconds; PID's threads dumped at AT, then sent SIG)\n");
		return 2;
	}
	int every = atoi(argv[1]), at = atoi(argv[2]), pid = argc > 3 ? atoi(argv[3]) : 0,
	    sig = argc > 4 ? atoi(argv[4]) : 0;
	if (mlockall(MCL_CURRENT | MCL_FUTURE))
		perror("lockwatch: mlockall (it may stall with the rest)");
	if (pid)
		openTasks(pid); // the threads there now: the daemon's, once it serves
	const char *mem[] = {"MemFree", "Mlocked", "SwapFree", "AnonPages", "Shmem:", "SwapCached", 0};
	const char *vm[] = {"pswpin", "pswpout", "allocstall_normal", "oom_kill", "pgscan_direct ", "pgsteal_direct ", 0};
	int meminfo = open("/proc/meminfo", O_RDONLY), vmstat = open("/proc/vmstat", O_RDONLY);
	int sysrq = open("/proc/sysrq-trigger", O_WRONLY);
	for (int t = every;; t += every) {
		sleep(every);
		keys(meminfo, mem);
		keys(vmstat, vm);
		if (t >= at && t - every < at) {
			tasks();
			if (sysrq >= 0) {
				write(sysrq, "t", 1);
				sleep(2);
				write(sysrq, "m", 1);
			}
			if (pid && sig)
				kill(pid, sig);
		}
	}
}
