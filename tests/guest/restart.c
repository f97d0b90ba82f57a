// restart: stop a daemon and start the next one without touching swap.
//
//   restart SIGNAL PID SOCKET LOG -- PROGRAM ARGS...
//
// While a swap daemon is down its device holds every swap I/O until the
// next one takes it over; a shell restarting it may itself have pages out
// on that device and wait for good (seen in the guest). This program locks
// itself in memory first and allocates nothing after, so it sends SIGNAL to
// PID, waits for PID to end, starts PROGRAM (stdout and stderr appended to
// LOG, in a session of its own) and returns once PROGRAM's socket exists.
// Build it static (cc -static), and keep PROGRAM on a filesystem that is
// never swapped (tmpfs -o noswap). Exit status: 0, or 1 with the reason.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// say prints a progress line to the console: the shell that started this
// may be waiting on a page out on the held device, and print nothing.
static void say(const char *fmt, long a) {
	int con = open("/dev/console", O_WRONLY);
	if (con >= 0) {
		dprintf(con, "restart: ");
		dprintf(con, fmt, a);
		dprintf(con, "\n");
		close(con);
	}
}

static void nap(void) {
	struct timespec ts = {0, 50 * 1000 * 1000};
	nanosleep(&ts, NULL);
}

// dump_log copies the end of the daemon's log (its goroutines after
// SIGQUIT) to the console: the shell that started this may be waiting on
// a swapped-out page, and could not print it.
static void dump_log(const char *log) {
	static char buf[65536];
	for (int i = 0; i < 60; i++)
		nap();
	int fd = open(log, O_RDONLY), con = open("/dev/console", O_WRONLY);
	if (fd < 0 || con < 0)
		return;
	off_t end = lseek(fd, 0, SEEK_END);
	lseek(fd, end > (off_t)sizeof buf ? end - (off_t)sizeof buf : 0, SEEK_SET);
	ssize_t n = read(fd, buf, sizeof buf);
	if (n > 0)
		write(con, buf, n);
	close(fd);
	close(con);
}

// dump_tasks prints every thread of pid to the console: its stat line
// (the state letter after the name), wchan and kernel stack, to tell a
// wait in Go (futex) from one in the kernel (a page on the held device).
static void dump_tasks(pid_t pid) {
	static char dents[8192], buf[8192], path[128];
	int con = open("/dev/console", O_WRONLY);
	snprintf(path, sizeof path, "/proc/%d/task", pid);
	int dir = open(path, O_RDONLY | O_DIRECTORY);
	if (con < 0 || dir < 0)
		return;
	long n;
	while ((n = syscall(SYS_getdents64, dir, dents, sizeof dents)) > 0)
		for (long i = 0; i < n;) {
			// struct linux_dirent64: ino, off, reclen, type, name.
			unsigned short reclen = *(unsigned short *)(dents + i + 16);
			const char *name = dents + i + 19;
			i += reclen;
			if (name[0] == '.')
				continue;
			static const char *files[] = {"stat", "wchan", "stack"};
			for (int f = 0; f < 3; f++) {
				snprintf(path, sizeof path, "/proc/%d/task/%s/%s", pid, name, files[f]);
				int fd = open(path, O_RDONLY);
				ssize_t m = fd < 0 ? 0 : read(fd, buf, sizeof buf - 1);
				if (fd >= 0)
					close(fd);
				dprintf(con, "RESTART-TASK %s %s: %.*s\n", name, files[f], (int)(m > 0 ? m : 0), buf);
			}
		}
	close(dir);
	close(con);
}

int main(int argc, char **argv) {
	if (argc < 7 || strcmp(argv[5], "--") != 0) {
		fprintf(stderr, "usage: restart SIGNAL PID SOCKET LOG -- PROGRAM ARGS...\n");
		return 2;
	}
	if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
		perror("restart: mlockall");
		return 1;
	}
	int sig = atoi(argv[1]);
	pid_t pid = atoi(argv[2]);
	const char *sock = argv[3], *log = argv[4];
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/%d/stat", pid);
	if (kill(pid, sig) != 0) {
		perror("restart: kill");
		return 1;
	}
	// A zombie keeps /proc/PID until its parent reaps it: the state
	// letter after the name says it has ended.
	say("signal sent to %ld", pid);
	int i;
	for (i = 0; i < 20 * 60 * 5; i++) {
		char buf[256];
		// A Go daemon still there after a minute: SIGQUIT makes it print
		// every goroutine's stack to its log, and end.
		if (i == 20 * 20)
			dump_tasks(pid);
		if (i == 20 * 60) {
			kill(pid, SIGQUIT);
			dump_log(log);
		}
		int fd = open(proc, O_RDONLY);
		if (fd < 0)
			break;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n > 0) {
			buf[n] = 0;
			char *p = strrchr(buf, ')');
			if (p && (p[2] == 'Z' || p[2] == 'X'))
				break;
		}
		nap();
	}
	say("old daemon gone after %ld ms", i * 50L);
	unlink(sock);
	pid_t child = fork();
	if (child < 0) {
		perror("restart: fork");
		return 1;
	}
	if (child == 0) {
		setsid();
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(argv[6], argv + 6);
		_exit(127);
	}
	struct stat st;
	for (int i = 0; i < 20 * 120; i++) {
		if (i % (20 * 15) == 0)
			say("waiting for the new daemon's socket, %ld s", i / 20);
		if (stat(sock, &st) == 0) {
			say("new daemon serves after %ld ms", i * 50L);
			printf("%d\n", child);
			return 0;
		}
		nap();
	}
	fprintf(stderr, "restart: %s did not appear\n", sock);
	dump_tasks(child);
	dump_log(log);
	return 1;
}
