/*
 * output.c — the files `nabla train` writes besides the checkpoint (metrics
 * CSV, chart PNG): an existing target must be a regular file, a symlink is
 * written through (the file it points to is replaced), the existing file's
 * mode is kept, and the new contents replace the old atomically (temporary
 * file next to the target, fsync, rename), so a failure leaves it intact.
 * nb_safetensors_save treats the checkpoint the same way.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file writing `path` replaces (a symlink resolved) into target, and its mode ((mode_t)-1: a new file);
 * CLI_OK or CLI_FAIL after one error line. */
static int resolve(const char *cmd, const char *what, const char *path, char target[PATH_MAX], mode_t *mode) {
    struct stat st;
    *mode = (mode_t)-1;
    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return cli_error(cmd, CLI_FAIL, "cannot write the %s %s: it exists and is not a regular file", what, path);
        if (!realpath(path, target))
            return cli_error(cmd, CLI_FAIL, "cannot write the %s %s: %s", what, path, strerror(errno));
        *mode = st.st_mode & 07777;
    } else if (errno == ENOENT && lstat(path, &st) == 0) {
        return cli_error(cmd, CLI_FAIL, "cannot write the %s %s: it is a symbolic link to a missing file", what, path);
    } else if (errno != ENOENT || strlen(path) >= PATH_MAX) {
        return cli_error(cmd, CLI_FAIL, "cannot write the %s %s: %s", what, path, strerror(errno ? errno : ENAMETOOLONG));
    } else {
        strcpy(target, path);
    }
    char dir[PATH_MAX];
    const char *slash = strrchr(target, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash == target ? 1 : slash - target) : 1, slash ? target : ".");
    if (access(dir, W_OK) != 0)
        return cli_error(cmd, CLI_FAIL, "cannot write the %s %s: its directory is missing or not writable", what, path);
    return CLI_OK;
}

int cli_output_check(const char *cmd, const char *what, const char *path) {
    char target[PATH_MAX];
    mode_t mode;
    return resolve(cmd, what, path, target, &mode);
}

static bool write_all(int fd, const void *data, size_t n) {
    for (const char *p = data; n > 0;) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

int cli_output_write(const char *cmd, const char *what, const char *path, const void *data, size_t n) {
    char target[PATH_MAX], tmp[PATH_MAX + 32];
    mode_t mode;
    if (resolve(cmd, what, path, target, &mode) != CLI_OK) return CLI_FAIL;
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", target, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    bool ok = fd >= 0 && (mode == (mode_t)-1 || fchmod(fd, mode) == 0) && write_all(fd, data, n) && fsync(fd) == 0;
    int err = errno;
    if (fd >= 0 && close(fd) != 0 && ok) ok = false, err = errno;
    if (ok && rename(tmp, target) != 0) ok = false, err = errno;
    if (!ok && fd >= 0) unlink(tmp);
    return ok ? CLI_OK : cli_error(cmd, CLI_FAIL, "cannot write the %s %s: %s", what, path, strerror(err));
}
