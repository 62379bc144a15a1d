/* Files the CLI reads from or writes for the user, handled so that nothing
 * is lost and nothing untrusted can take the process down:
 *
 *   - run logs are read first in a child process (ds__cli_probe_runlog): a
 *     file corrupt enough to crash libhdf5, to make it loop or to make it
 *     allocate without bound is reported as a corrupt file (exit 3) instead
 *     of killing `dsim info` or `dsim export`;
 *   - outputs are written to a uniquely named temporary file (mkstemp) in the
 *     target's directory and moved into place: an existing file is replaced
 *     only with --force, and never when it is one of the command's inputs;
 *     the final file gets the user's umask, not mkstemp's 0600. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "dsim/dsim.h"
#include "dsim/runlog.h"

#if defined(__SANITIZE_ADDRESS__)
#  define DS_CLI_ASAN 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define DS_CLI_ASAN 1
#  endif
#endif

/* seconds a probe may take before the file is called pathological */
#define PROBE_SECONDS 120

/* The reads `dsim info` / `dsim export` make, in this process: 0 or the
 * exit code, the message into msg. */
static int probe_reads(const char* path, const char* episode, char* msg, size_t n) {
  dsRunSummary s;
  int rc = ds_runlog_read_summary(path, &s, msg, n);
  char* text = NULL;
  if (!rc) rc = ds_runlog_read_config(path, &text, msg, n);
  ds_runlog_free(text);
  if (!rc && episode) {
    int nf = 0, h = 0, w = 0;
    uint8_t* rgba = NULL;
    rc = ds_runlog_read_frames(path, episode, &nf, &h, &w, &rgba, msg, n);
    ds_runlog_free(rgba);
    if (rc == DS_ERR_NOTFOUND) rc = DS_OK; /* the command itself says so */
  }
  if (!rc) return DS_EXIT_OK;
  return ds__cli_exit_code(rc, DS_CLI_RUNLOG);
}

int ds__cli_probe_runlog(const char* cmd, const char* path, const char* episode) {
  int fds[2];
  char msg[1024] = "";
  if (pipe(fds) != 0) return DS_EXIT_OK; /* cannot isolate: the command reads it directly */
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return DS_EXIT_OK;
  }
  if (pid == 0) {
    close(fds[0]);
#ifndef DS_CLI_ASAN
    /* libhdf5's own allocations on a corrupt file are bounded too */
    struct rlimit rl;
    size_t lim = ds_memory_limit();
    if (lim < (size_t)1 << 62) {
      rl.rlim_cur = rl.rlim_max = (rlim_t)(lim + ((size_t)1 << 30));
      setrlimit(RLIMIT_AS, &rl);
    }
#endif
    alarm(PROBE_SECONDS);
    /* test hook (tests/test_outputs.sh): act as if libhdf5 had crashed */
    const char* t = getenv("DSIM_TEST_PROBE_SIGNAL");
    if (t && *t) raise(atoi(t));
    int code = probe_reads(path, episode, msg, sizeof msg);
    size_t len = strlen(msg), off = 0;
    while (off < len) {
      ssize_t w = write(fds[1], msg + off, len - off);
      if (w <= 0) break;
      off += (size_t)w;
    }
    close(fds[1]);
    _exit(code);
  }
  close(fds[1]);
  size_t len = 0;
  for (;;) {
    ssize_t got = read(fds[0], msg + len, sizeof msg - 1 - len);
    if (got > 0) {
      len += (size_t)got;
      if (len >= sizeof msg - 1) break;
    } else if (got < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  msg[len] = '\0';
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code == DS_EXIT_OK) return code;
    if (msg[0]) {
      fprintf(stderr, "dsim %s: %s\n", cmd, msg);
      return code;
    }
    /* ended without the reader's message: a crash handler (a sanitizer's)
     * took over inside libhdf5 */
    fprintf(stderr, "dsim %s: %s: the HDF5 library failed on this file (the reading process ended with status %d): "
            "the file is corrupt\n", cmd, path, code);
    return DS_EXIT_INPUT;
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGALRM)
      fprintf(stderr, "dsim %s: %s: reading it took more than %d s: the file is corrupt or pathological\n", cmd, path,
              PROBE_SECONDS);
    else
      fprintf(stderr, "dsim %s: %s: the HDF5 library failed on this file (signal %d, %s): the file is corrupt\n", cmd,
              path, sig, strsignal(sig));
    return DS_EXIT_INPUT;
  }
  return DS_EXIT_OK;
}

int ds__cli_same_file(const char* a, const char* b) {
  struct stat sa, sb;
  return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The directory part of path ("." when none). */
static void dir_of(const char* path, char* dir, size_t n) {
  snprintf(dir, n, "%s", path);
  char* slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, n, ".");
  else if (slash == dir)
    dir[1] = '\0';
  else
    *slash = '\0';
}

int ds__cli_check_output(const char* cmd, const char* out, const char* input, int force) {
  struct stat st;
  if (input && ds__cli_same_file(out, input)) {
    fprintf(stderr, "dsim %s: %s is the input: refusing to replace it\n", cmd, out);
    return DS_EXIT_USAGE;
  }
  if (stat(out, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      fprintf(stderr, "dsim %s: %s is a directory; give a file name\n", cmd, out);
      return DS_EXIT_USAGE;
    }
    if (!force) {
      fprintf(stderr, "dsim %s: %s exists: give --force to replace it\n", cmd, out);
      return DS_EXIT_USAGE;
    }
  }
  char dir[4096];
  dir_of(out, dir, sizeof dir);
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "dsim %s: %s: cannot write: directory %s %s\n", cmd, out, dir,
            stat(dir, &st) != 0 ? "does not exist" : "is not a directory");
    return DS_EXIT_FAILURE;
  }
  return DS_EXIT_OK;
}

int ds__cli_temp_for(const char* cmd, const char* out, char* tmp, size_t n) {
  char dir[4096];
  dir_of(out, dir, sizeof dir);
  const char* base = strrchr(out, '/');
  base = base ? base + 1 : out;
  int k = snprintf(tmp, n, "%s/.%.200s.XXXXXX", dir, base);
  if (k < 0 || (size_t)k >= n) {
    fprintf(stderr, "dsim %s: %s: path too long\n", cmd, out);
    return -1;
  }
  int fd = mkstemp(tmp);
  if (fd < 0) {
    fprintf(stderr, "dsim %s: %s: cannot write: cannot create a temporary file in %s: %s\n", cmd, out, dir,
            strerror(errno));
    return -1;
  }
  return fd;
}

int ds__cli_commit_temp(const char* cmd, const char* tmp, const char* out, int force) {
  const mode_t mask = umask(0);
  umask(mask);
  int rc = chmod(tmp, 0666 & ~mask);
  if (rc == 0) {
    if (force) {
      rc = rename(tmp, out);
    } else {
      /* link() does not replace: an output that appeared meanwhile is kept */
      rc = link(tmp, out);
      if (rc == 0) unlink(tmp);
    }
  }
  if (rc != 0) {
    const int e = errno;
    unlink(tmp);
    fprintf(stderr, "dsim %s: %s: cannot write: %s%s\n", cmd, out, strerror(e),
            e == EEXIST ? " (created meanwhile; give --force to replace it)" : "");
    return DS_EXIT_FAILURE;
  }
  return DS_EXIT_OK;
}

