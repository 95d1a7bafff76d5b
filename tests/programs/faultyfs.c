// faultyfs: shared storage that fails the way Lustre or NFS do, for the tests of a dump folder
// that stalls, slows down or errors (issue #44). A FUSE file system (libfuse3) passing every
// operation through to a backing folder; whatever changes the file system (create, write,
// mkdir, rename, link, unlink, fsync, truncate) first asks the control file what to do:
//
//   ok          go on (also: an empty or missing control file)
//   stall       wait until the control file says something else (a mount that hangs)
//   delay S     wait S seconds, then go on (a slow server, every change)
//   slow-writes S   each write of data waits S seconds (a slow server, "S s per write")
//   eio         fail with EIO; enospc, erofs: with ENOSPC, EROFS
//
// Reads are never held: a reader on another node still sees what reached the server.
//
// usage: faultyfs BACKING_DIR CONTROL_FILE MOUNTPOINT   (stays in the foreground; unmount
//        with `fusermount3 -u MOUNTPOINT` or a signal)
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int backing = -1;
static const char* control_path;

// The path relative to the backing folder ("/" is ".").
static const char* rel(const char* path) { return path[1] == '\0' ? "." : path + 1; }

static void readControl(char* mode, size_t size) {
  mode[0] = '\0';
  FILE* f = fopen(control_path, "re");
  if (f == NULL) return;
  if (fgets(mode, (int)size, f) == NULL) mode[0] = '\0';
  fclose(f);
  mode[strcspn(mode, "\r\n")] = '\0';
}

static void sleepSeconds(double s) {
  struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

// What the control file says about a change: 0 to go on, or -errno.
static int faultOf(int data_write) {
  char mode[64];
  for (;;) {
    readControl(mode, sizeof mode);
    if (strcmp(mode, "stall") != 0) break;
    sleepSeconds(0.1);
  }
  if (strncmp(mode, "delay ", 6) == 0) sleepSeconds(atof(mode + 6));
  if (data_write && strncmp(mode, "slow-writes ", 12) == 0) sleepSeconds(atof(mode + 12));
  if (strcmp(mode, "eio") == 0) return -EIO;
  if (strcmp(mode, "enospc") == 0) return -ENOSPC;
  if (strcmp(mode, "erofs") == 0) return -EROFS;
  return 0;
}

static int fault(void) { return faultOf(0); }

static int result(int rc) { return rc < 0 ? -errno : rc; }

static int fs_getattr(const char* path, struct stat* st, struct fuse_file_info* fi) {
  if (fi != NULL) return result(fstat((int)fi->fh, st));
  return result(fstatat(backing, rel(path), st, AT_SYMLINK_NOFOLLOW));
}

static int fs_access(const char* path, int mask) { return result(faccessat(backing, rel(path), mask, 0)); }

static int fs_readlink(const char* path, char* buf, size_t size) {
  ssize_t n = readlinkat(backing, rel(path), buf, size - 1);
  if (n < 0) return -errno;
  buf[n] = '\0';
  return 0;
}

static int fs_readdir(const char* path, void* buf, fuse_fill_dir_t fill, off_t offset, struct fuse_file_info* fi,
                      enum fuse_readdir_flags flags) {
  (void)offset;
  (void)fi;
  (void)flags;
  int fd = openat(backing, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  DIR* dir = fdopendir(fd);
  if (dir == NULL) {
    close(fd);
    return -errno;
  }
  struct dirent* e;
  while ((e = readdir(dir)) != NULL) {
    struct stat st = {.st_ino = e->d_ino, .st_mode = (mode_t)DTTOIF(e->d_type)};
    if (fill(buf, e->d_name, &st, 0, 0)) break;
  }
  closedir(dir);
  return 0;
}

static int fs_mkdir(const char* path, mode_t mode) {
  int f = fault();
  return f ? f : result(mkdirat(backing, rel(path), mode));
}

static int fs_unlink(const char* path) {
  int f = fault();
  return f ? f : result(unlinkat(backing, rel(path), 0));
}

static int fs_rmdir(const char* path) {
  int f = fault();
  return f ? f : result(unlinkat(backing, rel(path), AT_REMOVEDIR));
}

static int fs_symlink(const char* target, const char* path) {
  int f = fault();
  return f ? f : result(symlinkat(target, backing, rel(path)));
}

static int fs_rename(const char* from, const char* to, unsigned int flags) {
  int f = fault();
  return f ? f : result(renameat2(backing, rel(from), backing, rel(to), flags));
}

static int fs_link(const char* from, const char* to) {
  int f = fault();
  return f ? f : result(linkat(backing, rel(from), backing, rel(to), 0));
}

static int fs_chmod(const char* path, mode_t mode, struct fuse_file_info* fi) {
  if (fi != NULL) return result(fchmod((int)fi->fh, mode));
  return result(fchmodat(backing, rel(path), mode, 0));
}

static int fs_chown(const char* path, uid_t uid, gid_t gid, struct fuse_file_info* fi) {
  if (fi != NULL) return result(fchown((int)fi->fh, uid, gid));
  return result(fchownat(backing, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW));
}

static int fs_truncate(const char* path, off_t size, struct fuse_file_info* fi) {
  int f = fault();
  if (f) return f;
  if (fi != NULL) return result(ftruncate((int)fi->fh, size));
  int fd = openat(backing, rel(path), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = result(ftruncate(fd, size));
  close(fd);
  return rc;
}

static int fs_utimens(const char* path, const struct timespec tv[2], struct fuse_file_info* fi) {
  if (fi != NULL) return result(futimens((int)fi->fh, tv));
  return result(utimensat(backing, rel(path), tv, AT_SYMLINK_NOFOLLOW));
}

static int fs_create(const char* path, mode_t mode, struct fuse_file_info* fi) {
  int f = fault();
  if (f) return f;
  int fd = openat(backing, rel(path), fi->flags | O_CLOEXEC, mode);
  if (fd < 0) return -errno;
  fi->fh = (uint64_t)fd;
  return 0;
}

static int fs_open(const char* path, struct fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
    int f = fault();
    if (f) return f;
  }
  int fd = openat(backing, rel(path), fi->flags | O_CLOEXEC);
  if (fd < 0) return -errno;
  fi->fh = (uint64_t)fd;
  return 0;
}

static int fs_read(const char* path, char* buf, size_t size, off_t offset, struct fuse_file_info* fi) {
  (void)path;
  ssize_t n = pread((int)fi->fh, buf, size, offset);
  return n < 0 ? -errno : (int)n;
}

static int fs_write(const char* path, const char* buf, size_t size, off_t offset, struct fuse_file_info* fi) {
  (void)path;
  int f = faultOf(1);
  if (f) return f;
  // O_APPEND files: the kernel passes the offset of the end it knows; the backing fd appends.
  ssize_t n = (fi->flags & O_APPEND) ? write((int)fi->fh, buf, size) : pwrite((int)fi->fh, buf, size, offset);
  return n < 0 ? -errno : (int)n;
}

static int fs_statfs(const char* path, struct statvfs* st) {
  (void)path;
  return result(fstatvfs(backing, st));
}

static int fs_release(const char* path, struct fuse_file_info* fi) {
  (void)path;
  close((int)fi->fh);
  return 0;
}

static int fs_fsync(const char* path, int datasync, struct fuse_file_info* fi) {
  (void)path;
  int f = fault();
  if (f) return f;
  return result(datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh));
}

static void* fs_init(struct fuse_conn_info* conn, struct fuse_config* cfg) {
  (void)conn;
  cfg->use_ino = 1;
  // No caching: every change reaches this process (and its fault) when it is made.
  cfg->entry_timeout = 0;
  cfg->attr_timeout = 0;
  cfg->negative_timeout = 0;
  cfg->direct_io = 0;
  return NULL;
}

static const struct fuse_operations ops = {
    .init = fs_init,
    .getattr = fs_getattr,
    .access = fs_access,
    .readlink = fs_readlink,
    .readdir = fs_readdir,
    .mkdir = fs_mkdir,
    .symlink = fs_symlink,
    .unlink = fs_unlink,
    .rmdir = fs_rmdir,
    .rename = fs_rename,
    .link = fs_link,
    .chmod = fs_chmod,
    .chown = fs_chown,
    .truncate = fs_truncate,
    .utimens = fs_utimens,
    .open = fs_open,
    .create = fs_create,
    .read = fs_read,
    .write = fs_write,
    .statfs = fs_statfs,
    .release = fs_release,
    .fsync = fs_fsync,
};

int main(int argc, char** argv) {
  if (argc != 4 || strcmp(argv[1], "--help") == 0) {
    fprintf(stderr, "usage: faultyfs BACKING_DIR CONTROL_FILE MOUNTPOINT\n");
    return argc == 2 ? 0 : 2;
  }
  backing = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (backing < 0) {
    fprintf(stderr, "faultyfs: cannot open %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  control_path = argv[2];
  // Foreground; many threads, so one held change does not hold the reads behind it.
  char* fuse_argv[] = {argv[0], "-f", "-o", "fsname=faultyfs", argv[3], NULL};
  umask(0);
  return fuse_main(5, fuse_argv, &ops, NULL);
}
