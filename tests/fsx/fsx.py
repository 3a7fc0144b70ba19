#!/usr/bin/env python3
"""Differential fsx-like tester: sepfs mount vs a plain ext4 directory.

Run as root after a build; `ci` is the mount suite's test (tests/meson.build):
fixed seeds on a fresh work directory and reference image. Environment:
SEPFS_BIN (default build/tools/sepfs), FSX_WORK (stores, mounts, logs;
default /var/tmp/sepfs-fsx), FSX_REF (an ext4 directory with ea_inode to
compare against; default a loop image under FSX_WORK), FSX_MKFS (extra
mkfs arguments), FSX_GC_WEIGHT.

Usage:
  fsx.py run --seed S --ops N [--opts MOUNTOPTS] [--remount-every 300]
  fsx.py replay LOGFILE [--opts MOUNTOPTS]         (re-execute a saved op log)
  fsx.py reduce LOGFILE [--opts ...]               (delta-debug to a minimal op log)
  fsx.py ci [--ops N]                              (CI_RUNS, each N ops; FSX_* ignored)

Ops are generated from a seeded RNG into explicit tuples (JSON), executed on
both sides (sepfs first), and the results compared.  The op log is saved to
WORK/fail-SEED.json on the first divergence.
"""
import argparse, ctypes, ctypes.util, errno, faulthandler, hashlib, json, mmap, os
import random, shutil, signal, stat, subprocess, sys, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B = os.environ.get('SEPFS_BIN', os.path.join(REPO, 'build', 'tools', 'sepfs'))
WORK = os.environ.get('FSX_WORK', '/var/tmp/sepfs-fsx')
# The reference side: an ext4 directory whose xattr values may reach 64 KiB
# (ea_inode; a root ext4 without it refuses values over about 4 KiB).
# setup_ref() loop-mounts an image under WORK unless FSX_REF names one.
REFROOT = os.environ.get('FSX_REF', WORK + '/ref')
BS = 65536
GC_WEIGHT = float(os.environ.get('FSX_GC_WEIGHT', '0.3'))
MKFS_ARGS = os.environ.get('FSX_MKFS', '').split()

libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.getxattr.restype = ctypes.c_ssize_t
libc.listxattr.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.listxattr.restype = ctypes.c_ssize_t
libc.lseek.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int]
libc.lseek.restype = ctypes.c_int64
AT_FDCWD = -100
FALLOC_FL_KEEP_SIZE = 1
FALLOC_FL_PUNCH_HOLE = 2
FALLOC_FL_ZERO_RANGE = 0x10
SEEK_DATA, SEEK_HOLE = 3, 4
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


class Diverge(Exception):
    pass


class Crash(Exception):
    pass


def ename(e):
    return errno.errorcode.get(e, str(e))


def fcntl_flags(fd):
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_GETFL)


def gen_data(key, n):
    """Deterministic, self-describing data: 16-byte units 'KKKKKK@IIIIIIII\\n'."""
    if n <= 0:
        return b''
    if key < 0:
        return b'\0' * n
    ph = key % 16
    units = (n + ph) // 16 + 1
    k = key % 1000000
    buf = b''.join([b'%06d@%08x\n' % (k, i) for i in range(units)])
    return buf[ph:ph + n]


def cerr():
    return ('err', ename(ctypes.get_errno()))


# --------------------------------------------------------------------------
# sepfs mount management

class Sepfs:
    def __init__(self, store, mnt, opts, logf):
        self.store, self.mnt, self.opts, self.logf = store, mnt, opts, logf
        self.proc = None

    def mounted(self):
        with open('/proc/mounts') as f:
            return any(l.split()[1] == self.mnt for l in f)

    def mkfs(self):
        if os.path.exists(self.store):
            shutil.rmtree(self.store)
        subprocess.run([B, 'mkfs'] + MKFS_ARGS + [self.store], check=True, stdout=subprocess.DEVNULL)
        os.makedirs(self.mnt, exist_ok=True)

    def mount(self):
        cmd = [B, 'mount', '-f']
        if self.opts:
            cmd += ['-o', self.opts]
        cmd += [self.store, self.mnt]
        self.logf.write('### mount %s\n' % ' '.join(cmd)); self.logf.flush()
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=self.logf, stdin=subprocess.DEVNULL)
        for _ in range(500):
            if self.mounted():
                return
            if self.proc.poll() is not None:
                raise Crash('mount exited %s' % self.proc.returncode)
            time.sleep(0.02)
        raise Crash('mount did not appear')

    def umount(self):
        r = subprocess.run(['umount', self.mnt], capture_output=True, text=True)
        if r.returncode != 0:
            raise Crash('umount failed: %s' % r.stderr)
        try:
            rc = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            raise Crash('daemon did not exit after umount')
        if rc != 0:
            raise Crash('daemon exit status %s after umount' % rc)
        self.proc = None

    def fsck(self):
        r = subprocess.run([B, 'fsck', self.store], capture_output=True, text=True)
        return r.returncode, (r.stdout + r.stderr).strip()

    def alive(self):
        return self.mounted() and (self.proc is None or self.proc.poll() is None)


# --------------------------------------------------------------------------
# one side: executes ops on a root directory

class Side:
    def __init__(self, root, name):
        self.root, self.name = root, name
        self.fds = {}          # slot -> fd

    def p(self, rel):
        return os.path.join(self.root, rel) if rel else self.root

    def close_all(self):
        for s, fd in list(self.fds.items()):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds.clear()

    def fd(self, slot):
        return self.fds.get(slot)

    def run(self, op):
        kind = op[0]
        f = getattr(self, 'op_' + kind)
        try:
            return f(*op[1:])
        except OSError as e:
            return ('err', ename(e.errno))

    # ---- file descriptor ops
    def op_open(self, slot, path, flags, mode):
        if slot in self.fds:
            os.close(self.fds.pop(slot))
        fd = os.open(self.p(path), flags, mode)
        self.fds[slot] = fd
        st = os.fstat(fd)
        return ('ok', stat.S_IFMT(st.st_mode), None if stat.S_ISDIR(st.st_mode) else st.st_size)

    def op_close(self, slot):
        fd = self.fds.pop(slot, None)
        if fd is None:
            return ('noslot',)
        os.close(fd)
        return ('ok',)

    def _fd(self, slot):
        fd = self.fds.get(slot)
        if fd is None:
            raise OSError(errno.EBADF, 'no slot')
        return fd

    def op_pwrite(self, slot, off, n, key):
        return ('ok', os.pwrite(self._fd(slot), gen_data(key, n), off))

    def op_write(self, slot, n, key):
        fd = self._fd(slot)
        r = os.write(fd, gen_data(key, n))
        return ('ok', r, os.lseek(fd, 0, os.SEEK_CUR))

    def op_pread(self, slot, off, n):
        d = os.pread(self._fd(slot), n, off)
        return ('ok', len(d), hashlib.md5(d).hexdigest())

    def op_read(self, slot, n):
        fd = self._fd(slot)
        d = os.read(fd, n)
        return ('ok', len(d), hashlib.md5(d).hexdigest(), os.lseek(fd, 0, os.SEEK_CUR))

    def op_lseek(self, slot, off, whence):
        if stat.S_ISDIR(os.fstat(self._fd(slot)).st_mode):
            return ('dir',)   # directory offsets are file-system specific
        return ('ok', os.lseek(self._fd(slot), off, whence))

    def op_seekdh(self, slot, off, whence):
        # SEEK_DATA / SEEK_HOLE: only sanity-checked (granularity differs)
        fd = self._fd(slot)
        cur = os.lseek(fd, 0, os.SEEK_CUR)
        r = libc.lseek(fd, off, whence)
        if r < 0:
            return cerr()
        os.lseek(fd, cur, os.SEEK_SET)   # positions would legitimately differ
        return ('ok', r)

    def op_ftruncate(self, slot, size):
        os.ftruncate(self._fd(slot), size)
        return ('ok',)

    def op_truncate(self, path, size):
        os.truncate(self.p(path), size)
        return ('ok',)

    def op_fallocate(self, slot, mode, off, n):
        r = libc.fallocate(self._fd(slot), mode, off, n)
        if r != 0:
            return cerr()
        return ('ok', os.fstat(self._fd(slot)).st_size)

    def op_cfr(self, src, dst, n, off_in, off_out):
        r = os.copy_file_range(self._fd(src), self._fd(dst), n, off_in, off_out)
        return ('ok', r)

    def _map(self, slot, off, n, prot):
        """(mapping of [off, off + n) of slot's file, off's place in it), or
        (None, size) when the range passes the end of a regular file."""
        fd = self._fd(slot)
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and off + n > st.st_size:
            return None, st.st_size
        base = off & ~(mmap.ALLOCATIONGRANULARITY - 1)
        m = mmap.mmap(fd, off + n - base, flags=mmap.MAP_SHARED, prot=prot, offset=base)
        return m, off - base

    def op_mmap_write(self, slot, off, n, key, sync):
        m, at = self._map(slot, off, n, mmap.PROT_READ | mmap.PROT_WRITE)
        if m is None:
            return ('beyond-eof', at)
        try:
            m[at:at + n] = gen_data(key, n)
            if sync:
                m.flush()
        finally:
            m.close()
        return ('ok',)

    def op_mmap_read(self, slot, off, n):
        m, at = self._map(slot, off, n, mmap.PROT_READ)
        if m is None:
            return ('beyond-eof', at)
        try:
            d = m[at:at + n]
        finally:
            m.close()
        return ('ok', hashlib.md5(d).hexdigest())

    def op_fsync(self, slot):
        os.fsync(self._fd(slot))
        return ('ok',)

    def op_fdatasync(self, slot):
        os.fdatasync(self._fd(slot))
        return ('ok',)

    def op_fstat(self, slot):
        st = os.fstat(self._fd(slot))
        return ('ok',) + self.stkey(st)

    def op_fsetxattr(self, slot, name, n, key, flags):
        os.setxattr(self._fd(slot), name, gen_data(key, n), flags)
        return ('ok',)

    def op_fgetxattr(self, slot, name):
        v = os.getxattr(self._fd(slot), name)
        return ('ok', len(v), hashlib.md5(v).hexdigest())

    def op_flistxattr(self, slot):
        return ('ok', sorted(os.listxattr(self._fd(slot))))

    # ---- path ops
    @staticmethod
    def stkey(st):
        m = st.st_mode
        size = None if stat.S_ISDIR(m) else st.st_size
        return (oct(m), st.st_nlink, size, st.st_uid, st.st_gid)

    def op_stat(self, path, follow):
        st = os.stat(self.p(path), follow_symlinks=follow)
        return ('ok',) + self.stkey(st)

    def op_rename(self, a, b):
        os.rename(self.p(a), self.p(b))
        return ('ok',)

    def op_renameat2(self, a, b, flags):
        r = libc.renameat2(AT_FDCWD, self.p(a).encode(), AT_FDCWD, self.p(b).encode(), flags)
        if r != 0:
            return cerr()
        return ('ok',)

    def op_link(self, a, b):
        os.link(self.p(a), self.p(b), follow_symlinks=False)
        return ('ok',)

    def op_unlink(self, path):
        os.unlink(self.p(path))
        return ('ok',)

    def op_mkdir(self, path, mode):
        os.mkdir(self.p(path), mode)
        return ('ok',)

    def op_rmdir(self, path):
        os.rmdir(self.p(path))
        return ('ok',)

    def op_symlink(self, target, path):
        os.symlink(target, self.p(path))
        return ('ok',)

    def op_readlink(self, path):
        return ('ok', os.readlink(self.p(path)))

    def op_chmod(self, path, mode):
        os.chmod(self.p(path), mode)
        return ('ok', oct(os.stat(self.p(path)).st_mode))

    def op_utime(self, path, a, m, follow):
        os.utime(self.p(path), ns=(a, m), follow_symlinks=follow)
        st = os.stat(self.p(path), follow_symlinks=follow)
        return ('ok', st.st_atime_ns, st.st_mtime_ns)

    def op_setxattr(self, path, name, n, key, flags):
        os.setxattr(self.p(path), name, gen_data(key, n), flags, follow_symlinks=False)
        return ('ok',)

    def op_getxattr(self, path, name):
        v = os.getxattr(self.p(path), name, follow_symlinks=False)
        return ('ok', len(v), hashlib.md5(v).hexdigest())

    def op_removexattr(self, path, name):
        os.removexattr(self.p(path), name, follow_symlinks=False)
        return ('ok',)

    def op_listxattr(self, path):
        return ('ok', sorted(os.listxattr(self.p(path), follow_symlinks=False)))

    def op_xattr_probe(self, path, name, bufsz):
        # raw getxattr/listxattr with a given buffer size (0 = size query, small = ERANGE)
        buf = ctypes.create_string_buffer(max(bufsz, 1))
        r = libc.getxattr(self.p(path).encode(), name.encode(), buf if bufsz else None, bufsz)
        g = cerr() if r < 0 else ('ok', r, hashlib.md5(buf.raw[:r]).hexdigest() if bufsz else None)
        buf2 = ctypes.create_string_buffer(max(bufsz, 1))
        r2 = libc.listxattr(self.p(path).encode(), buf2 if bufsz else None, bufsz)
        l = cerr() if r2 < 0 else ('ok', r2, sorted(buf2.raw[:r2].split(b'\0')) if bufsz else None)
        return ('ok', g, l)

    def op_gc(self, min_garbage='0'):
        if self.name == 'sepfs':
            mnt = self.root[:-2]   # root is MNT/t
            r = subprocess.run([B, 'gc', '--min-garbage=' + min_garbage, mnt],
                               capture_output=True, text=True)
            if r.returncode != 0:
                return ('gc-failed', r.returncode, r.stderr[-500:])
        return ('ok',)

    def op_mtime_probe(self, slot, sub):
        fd = self._fd(slot)
        T = 1000000000 * 1000000 + 123
        os.utime(fd, ns=(T, T))
        r = self.run(tuple(sub))
        st = os.fstat(fd)
        return ('ok', r, st.st_mtime_ns != T)

    def op_listdir(self, path):
        return ('ok', sorted(os.listdir(self.p(path))))

    def op_mkbig(self, path, count, namelen):
        os.mkdir(self.p(path), 0o755)
        for i in range(count):
            nm = ('b%04d_' % i).ljust(namelen, 'x')
            os.close(os.open(os.path.join(self.p(path), nm), os.O_CREAT | os.O_WRONLY, 0o644))
        return ('ok',)

    def op_readdir_mutate(self, path, k, muts):
        d = self.p(path)
        before = set(os.listdir(d))
        got = []
        res = []
        created, deleted = set(), set()
        with os.scandir(d) as it:
            for e in it:
                got.append(e.name)
                if len(got) == k:
                    for kind, nm in muts:
                        try:
                            if kind == 'c':
                                os.close(os.open(os.path.join(d, nm), os.O_CREAT | os.O_WRONLY, 0o600))
                                created.add(nm)
                            else:
                                os.unlink(os.path.join(d, nm))
                                deleted.add(nm)
                            res.append('ok')
                        except OSError as ex:
                            res.append(ename(ex.errno))
        viol = []
        if len(got) != len(set(got)):
            dup = sorted({x for x in got if got.count(x) > 1})
            viol.append(('dup', dup[:5]))
        missing = (before - deleted) - set(got)
        if missing:
            viol.append(('missing', sorted(missing)[:5]))
        extra = set(got) - before - created
        if extra:
            viol.append(('extra', sorted(extra)[:5]))
        after = sorted(os.listdir(d))
        return ('ok', res, viol, hashlib.md5(repr(after).encode()).hexdigest())


# --------------------------------------------------------------------------
# joint checks

def read_range(path_or_fd, off, n):
    if isinstance(path_or_fd, int):
        return os.pread(path_or_fd, n, off)
    with open(path_or_fd, 'rb') as f:
        f.seek(off)
        return f.read(n)


def windows_for(size):
    """Ranges to compare for a file of this size (all of it if <= 48 MiB)."""
    if size <= 48 << 20:
        return [(0, size)]
    ws = [(0, 8 << 20), (max(0, size - (2 << 20)), 2 << 20)]
    step = size // 16
    for i in range(1, 16):
        ws.append((i * step - (256 << 10), 512 << 10))
    return ws


def compare_content(pa, pr, size, full=False, extra=()):
    """pa/pr: paths (opened O_RDONLY here). Returns None or a description."""
    fa = os.open(pa, os.O_RDONLY)
    fr = os.open(pr, os.O_RDONLY)
    try:
        ws = [(0, size)] if full else windows_for(size) + list(extra)
        for off, n in ws:
            pos, end = off, min(off + n, size)
            while pos < end:
                c = min(1 << 20, end - pos)
                da = os.pread(fa, c, pos)
                dr = os.pread(fr, c, pos)
                if da != dr:
                    i = next((j for j in range(min(len(da), len(dr))) if da[j] != dr[j]), min(len(da), len(dr)))
                    return ('content differs at %d (chunk %d len a=%d r=%d): sepfs=%r ref=%r' %
                            (pos + i, pos, len(da), len(dr), da[i:i + 32], dr[i:i + 32]))
                pos += c
        # read at EOF must return nothing
        if os.pread(fa, 16, size) != b'':
            return 'sepfs returns data past EOF %d' % size
    finally:
        os.close(fa)
        os.close(fr)
    return None


def blocks_sane(st):
    """sepfs allocates on write in 64 KiB blocks: st_blocks <= roundup(size, 64K)."""
    if not stat.S_ISREG(st.st_mode):
        return True
    lim = (st.st_size + BS - 1) // BS * BS
    return st.st_blocks * 512 <= lim + 0


def walk(root, skip_big=False):
    """{relpath: lstat} for everything under root (excluding root)."""
    out = {}
    stack = ['']
    while stack:
        d = stack.pop()
        for nm in os.listdir(os.path.join(root, d) if d else root):
            rel = os.path.join(d, nm) if d else nm
            st = os.lstat(os.path.join(root, rel))
            out[rel] = st
            if stat.S_ISDIR(st.st_mode):
                stack.append(rel)
    return out


def xattrs_of(path):
    out = {}
    for n in sorted(os.listxattr(path, follow_symlinks=False)):
        try:
            v = os.getxattr(path, n, follow_symlinks=False)
            out[n] = hashlib.md5(v).hexdigest() + ':%d' % len(v)
        except OSError as e:
            out[n] = ename(e.errno)
    return out


NOTES = {}


def compare_tree(ra, rr, full=False):
    """Compare whole trees; returns list of problems."""
    probs = []
    wa, wr = walk(ra), walk(rr)
    if set(wa) != set(wr):
        probs.append(('names', sorted(set(wa) - set(wr))[:10], sorted(set(wr) - set(wa))[:10]))
    inomap = {}
    for rel in sorted(set(wa) & set(wr)):
        sa, sr = wa[rel], wr[rel]
        ka, kr = Side.stkey(sa), Side.stkey(sr)
        if ka != kr:
            probs.append(('stat', rel, ka, kr))
            continue
        if not blocks_sane(sa):
            NOTES['st_blocks > roundup(size,64K) in tree walk'] = NOTES.get('st_blocks > roundup(size,64K) in tree walk', 0) + 1
        # hard link structure
        prev = inomap.setdefault(('r', sr.st_ino), sa.st_ino)
        if prev != sa.st_ino:
            probs.append(('hardlink-structure', rel))
        pa, pr = os.path.join(ra, rel), os.path.join(rr, rel)
        if stat.S_ISLNK(sa.st_mode):
            if os.readlink(pa) != os.readlink(pr):
                probs.append(('readlink', rel, os.readlink(pa), os.readlink(pr)))
        elif stat.S_ISREG(sa.st_mode):
            if sa.st_nlink > 1 and ('c', sr.st_ino) in inomap:
                pass
            else:
                inomap[('c', sr.st_ino)] = 1
                d = compare_content(pa, pr, sa.st_size, full=full and sa.st_size <= (512 << 20))
                if d:
                    probs.append(('content', rel, d))
        xa, xr = xattrs_of(pa), xattrs_of(pr)
        if xa != xr:
            probs.append(('xattrs', rel, xa, xr))
    return probs


# --------------------------------------------------------------------------
# op generation

NAMES = ['f0', 'f1', 'f2', 'f3', 'f4', 'f5', 'd0', 'd1', 'd2', 's0', 's1', 'x']
XNAMES = ['user.a', 'user.b', 'user.c', 'user.long.' + 'n' * 40, 'user.e']


class Gen:
    def __init__(self, rng, ref):
        self.rng, self.ref = rng, ref
        self.opno = 0

    def tree(self):
        self.w = walk(self.ref.root)
        self.dirs = [''] + [p for p, s in self.w.items() if stat.S_ISDIR(s.st_mode) and not p.startswith('big/')
                            and p.count('/') < 3]
        self.files = [p for p, s in self.w.items() if stat.S_ISREG(s.st_mode) and not p.startswith('big/')]
        self.links = [p for p, s in self.w.items() if stat.S_ISLNK(s.st_mode)]
        self.all = [p for p in self.w if not p.startswith('big/')]

    def newpath(self):
        r = self.rng
        d = r.choice(self.dirs)
        if r.random() < 0.03 and self.files:
            d = r.choice(self.files)  # ENOTDIR
        return os.path.join(d, r.choice(NAMES)) if d else r.choice(NAMES)

    def anypath(self, pfiles=0.6):
        r = self.rng
        x = r.random()
        if x < pfiles and self.files:
            return r.choice(self.files)
        if x < 0.8 and self.all:
            return r.choice(self.all)
        return self.newpath()

    def slot(self, open_only=True):
        slots = sorted(self.ref.fds)
        if open_only and slots and self.rng.random() < 0.97:
            return self.rng.choice(slots)
        return self.rng.randrange(8)

    def wslot(self):
        ws = [s for s, fd in self.ref.fds.items()
              if (fcntl_flags(fd) & os.O_ACCMODE) != os.O_RDONLY]
        if ws and self.rng.random() < 0.85:
            return self.rng.choice(sorted(ws))
        return self.slot()

    def xpath(self):
        have = []
        for p in self.all:
            try:
                if os.listxattr(self.ref.p(p), follow_symlinks=False):
                    have.append(p)
            except OSError:
                pass
        if have and self.rng.random() < 0.8:
            return self.rng.choice(have)
        return self.anypath(0.5)

    def size_of_slot(self, s):
        fd = self.ref.fds.get(s)
        if fd is None:
            return 0
        try:
            return os.fstat(fd).st_size
        except OSError:
            return 0

    def offset(self, size):
        r = self.rng
        x = r.random()
        if x < 0.30:
            return r.randint(0, size)
        if x < 0.52:
            k = r.randint(0, size // BS + 2)
            return max(0, k * BS + r.randint(-300, 300))
        if x < 0.65:
            return size
        if x < 0.76:
            return size + r.randint(1, 16 << 20)
        if x < 0.77:
            return r.randint(64 << 20, 300 << 20)
        return r.randint(0, max(size, 1 << 20))

    def length(self):
        r = self.rng
        x = r.random()
        if x < 0.15:
            return max(1, r.randint(1, 48) * BS + r.randint(-100, 100))
        if x < 0.20:
            return BS
        return max(1, int(2 ** r.uniform(0, 21.58)))   # 1 .. 3 MiB

    def datakey(self):
        return -1 if self.rng.random() < 0.08 else self.opno

    def next(self):
        self.opno += 1
        r = self.rng
        self.tree()
        ops = [('open', 10), ('close', 4), ('pwrite', 14), ('write', 4), ('pread', 4), ('read', 2),
               ('lseek', 1), ('seekdh', 1), ('ftruncate', 5), ('truncate', 2), ('fallocate', 5),
               ('cfr', 4), ('mmap_write', 3), ('mmap_read', 2), ('fsync', 2), ('fdatasync', 1),
               ('fstat', 2), ('rename', 4), ('renameat2', 3), ('link', 3), ('unlink', 4),
               ('mkdir', 3), ('rmdir', 3), ('symlink', 2), ('readlink', 1), ('chmod', 2), ('utime', 2),
               ('setxattr', 5), ('fsetxattr', 2), ('getxattr', 3), ('fgetxattr', 1), ('removexattr', 2),
               ('listxattr', 2), ('flistxattr', 1), ('xattr_probe', 1), ('stat', 3), ('listdir', 2),
               ('readdir_mutate', 1), ('mkbig', 0.2), ('gc', GC_WEIGHT), ('mtime_probe', 3)]
        tot = sum(w for _, w in ops)
        x = r.uniform(0, tot)
        for k, w in ops:
            x -= w
            if x <= 0:
                break
        return getattr(self, 'g_' + k)()

    def g_open(self):
        r = self.rng
        acc = r.choice([os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_RDWR, os.O_RDWR])
        fl = acc
        if r.random() < 0.5: fl |= os.O_CREAT
        if r.random() < 0.15: fl |= os.O_EXCL
        if r.random() < 0.15: fl |= os.O_TRUNC
        if r.random() < 0.15: fl |= os.O_APPEND
        if r.random() < 0.03: fl |= os.O_DIRECTORY
        if r.random() < 0.03: fl |= os.O_NOFOLLOW
        path = self.anypath(0.7) if r.random() < 0.7 else self.newpath()
        return ('open', r.randrange(8), path, fl, r.choice([0o644, 0o600, 0o755, 0o4755]))

    def g_mtime_probe(self):
        s = self.wslot()
        sub = None
        while sub is None or sub[0] not in ('pwrite', 'write', 'ftruncate', 'fallocate', 'cfr', 'mmap_write', 'fsetxattr'):
            sub = self.rng.choice([self.g_pwrite, self.g_write, self.g_ftruncate, self.g_fallocate,
                                   self.g_cfr, self.g_mmap_write, self.g_fsetxattr])()
        sub = list(sub)
        if sub[0] == 'cfr':
            sub[2] = s
        else:
            sub[1] = s
        return ('mtime_probe', s, tuple(sub))

    def g_gc(self):
        # Alternately every segment holding garbage and sepfs gc's default
        # threshold (no draw from rng: the seeds' sequences stay as they were).
        self.gcs = getattr(self, 'gcs', 0) + 1
        return ('gc', '0' if self.gcs % 2 else '20')

    def g_close(self):
        return ('close', self.slot())

    def g_pwrite(self):
        s = self.wslot()
        return ('pwrite', s, self.offset(self.size_of_slot(s)), self.length(), self.datakey())

    def g_write(self):
        return ('write', self.wslot(), self.length(), self.datakey())

    def g_pread(self):
        s = self.slot()
        return ('pread', s, self.offset(self.size_of_slot(s)), self.length())

    def g_read(self):
        return ('read', self.slot(), self.length())

    def g_lseek(self):
        s = self.slot()
        return ('lseek', s, self.offset(self.size_of_slot(s)), self.rng.choice([0, 0, 1, 2]))

    def g_seekdh(self):
        s = self.slot()
        return ('seekdh', s, self.offset(self.size_of_slot(s)), self.rng.choice([SEEK_DATA, SEEK_HOLE]))

    def g_ftruncate(self):
        s = self.wslot()
        sz = self.size_of_slot(s)
        r = self.rng
        x = r.random()
        if x < 0.4:
            n = r.randint(0, sz)
        elif x < 0.6:
            n = max(0, (sz // BS) * BS + r.randint(-BS, BS))
        elif x < 0.9:
            n = sz + r.randint(1, 4 << 20)
        else:
            n = r.randint(0, 64 << 20)
        if sz > (200 << 20):
            n = r.randint(0, 8 << 20)
        return ('ftruncate', s, n)

    def g_truncate(self):
        return ('truncate', self.anypath(), self.rng.randint(0, 3 << 20))

    def g_fallocate(self):
        s = self.wslot()
        r = self.rng
        mode = r.choice([0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                         FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, FALLOC_FL_ZERO_RANGE,
                         FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE])
        sz = self.size_of_slot(s)
        off = self.offset(sz) if r.random() < 0.5 else r.randint(0, max(sz, 1))
        n = self.length() if r.random() < 0.97 else 0
        return ('fallocate', s, mode, off, n)

    def g_cfr(self):
        a, b = self.slot(), self.wslot()
        r = self.rng
        sa, sb = self.size_of_slot(a), self.size_of_slot(b)
        return ('cfr', a, b, self.length(), r.randint(0, sa + 1000), self.offset(sb))

    def mmap_span(self, s):
        """(off, n) inside slot s's file, at most 1 MiB; None for an empty file."""
        sz = self.size_of_slot(s)
        if sz == 0:
            return None
        off = self.rng.randint(0, sz - 1)
        return off, self.rng.randint(1, min(sz - off, 1 << 20))

    def g_mmap_write(self):
        s = self.wslot()
        span = self.mmap_span(s)
        if span is None:
            return ('fstat', s)
        return ('mmap_write', s) + span + (self.datakey(), self.rng.random() < 0.7)

    def g_mmap_read(self):
        s = self.slot()
        span = self.mmap_span(s)
        return ('fstat', s) if span is None else ('mmap_read', s) + span

    def g_fsync(self):
        return ('fsync', self.slot())

    def g_fdatasync(self):
        return ('fdatasync', self.slot())

    def g_fstat(self):
        return ('fstat', self.slot())

    def g_rename(self):
        return ('rename', self.anypath(0.5), self.anypath(0.3) if self.rng.random() < 0.4 else self.newpath())

    def g_renameat2(self):
        fl = self.rng.choice([RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_EXCHANGE, 3])
        return ('renameat2', self.anypath(0.5), self.anypath(0.4) if self.rng.random() < 0.6 else self.newpath(), fl)

    def g_link(self):
        return ('link', self.anypath(0.8), self.newpath())

    def g_unlink(self):
        return ('unlink', self.anypath())

    def g_mkdir(self):
        return ('mkdir', self.newpath(), self.rng.choice([0o755, 0o700, 0o2775]))

    def g_rmdir(self):
        r = self.rng
        ds = [d for d in self.dirs if d]
        return ('rmdir', r.choice(ds) if ds and r.random() < 0.8 else self.anypath())

    def g_symlink(self):
        r = self.rng
        tgt = r.choice(NAMES + ['../' + r.choice(NAMES), 'nonexist', r.choice(NAMES) + '/' + r.choice(NAMES)])
        return ('symlink', tgt, self.newpath())

    def g_readlink(self):
        return ('readlink', self.rng.choice(self.links) if self.links and self.rng.random() < 0.8 else self.anypath())

    def g_chmod(self):
        return ('chmod', self.anypath(0.5), self.rng.choice([0o644, 0o600, 0o000, 0o777, 0o4755, 0o2755, 0o1777, 0o755]))

    def g_utime(self):
        r = self.rng
        return ('utime', self.anypath(0.5), r.randint(0, 2 ** 33) * 10 ** 9 + r.randint(0, 999999999),
                r.randint(0, 2 ** 33) * 10 ** 9 + r.randint(0, 999999999), r.random() < 0.8)

    def xsize(self):
        r = self.rng
        x = r.random()
        if x < 0.05: return 0
        if x < 0.10: return 65536
        if x < 0.12: return 65537
        if x < 0.6: return r.randint(1, 200)
        return r.randint(1, 65536)

    def g_setxattr(self):
        r = self.rng
        return ('setxattr', self.xpath() if r.random() < 0.5 else self.anypath(0.5), r.choice(XNAMES), self.xsize(), self.datakey(),
                r.choice([0, 0, 1, 2]))

    def g_fsetxattr(self):
        r = self.rng
        return ('fsetxattr', self.slot(), r.choice(XNAMES), self.xsize(), self.datakey(), r.choice([0, 1, 2]))

    def g_getxattr(self):
        return ('getxattr', self.xpath(), self.rng.choice(XNAMES))

    def g_fgetxattr(self):
        return ('fgetxattr', self.slot(), self.rng.choice(XNAMES))

    def g_removexattr(self):
        return ('removexattr', self.xpath(), self.rng.choice(XNAMES))

    def g_listxattr(self):
        return ('listxattr', self.xpath())

    def g_flistxattr(self):
        return ('flistxattr', self.slot())

    def g_xattr_probe(self):
        return ('xattr_probe', self.xpath(), self.rng.choice(XNAMES), self.rng.choice([0, 1, 5, 16, 100000]))

    def g_stat(self):
        return ('stat', self.anypath(0.4), self.rng.random() < 0.7)

    def g_listdir(self):
        return ('listdir', self.rng.choice(self.dirs) if self.rng.random() < 0.9 else self.anypath())

    def g_mkbig(self):
        if 'big' in self.w:
            return self.g_readdir_mutate()
        return ('mkbig', 'big', self.rng.randint(200, 600), self.rng.randint(20, 200))

    def g_readdir_mutate(self):
        r = self.rng
        d = 'big' if 'big' in self.w and stat.S_ISDIR(self.w['big'].st_mode) and r.random() < 0.7 else r.choice(self.dirs)
        ents = sorted(os.listdir(self.ref.p(d)))
        files = [e for e in ents if stat.S_ISREG(self.w[os.path.join(d, e) if d else e].st_mode)]
        muts = []
        for i in range(r.randint(1, 30)):
            if files and r.random() < 0.5:
                muts.append(('u', r.choice(files)))
            else:
                muts.append(('c', ('r%d_%d_' % (self.opno, i)).ljust(r.randint(10, 150), 'y')))
        return ('readdir_mutate', d, r.randint(1, max(1, len(ents))), muts)


# --------------------------------------------------------------------------
# the runner

FD_DATA_OPS = {'pwrite', 'write', 'ftruncate', 'fallocate', 'mmap_write', 'open'}


class Runner:
    def __init__(self, tag, opts):
        self.tag = tag
        self.store = '%s/store-%s' % (WORK, tag)
        self.mnt = '%s/mnt-%s' % (WORK, tag)
        self.dlog = open('%s/daemon-%s.log' % (WORK, tag), 'w')
        self.fs = Sepfs(self.store, self.mnt, opts, self.dlog)
        self.reftop = '%s/t-%s' % (REFROOT, tag)
        self.ops = []
        self.notes = {}
        self.kinds = {}

    def setup(self):
        if os.path.exists(self.mnt) and self.fs.mounted():
            subprocess.run(['umount', self.mnt])
        self.fs.mkfs()
        self.fs.mount()
        os.mkdir(self.mnt + '/t')
        if os.path.exists(self.reftop):
            shutil.rmtree(self.reftop)
        os.mkdir(self.reftop)
        os.mkdir(self.reftop + '/t')
        self.A = Side(self.mnt + '/t', 'sepfs')
        self.R = Side(self.reftop + '/t', 'ref')

    def teardown(self, keep=False):
        self.A.close_all()
        self.R.close_all()
        if self.fs.mounted():
            try:
                self.fs.umount()
            except Crash:
                pass
        if not keep:
            shutil.rmtree(self.store, ignore_errors=True)
            shutil.rmtree(self.reftop, ignore_errors=True)

    def note(self, k):
        self.notes[k] = self.notes.get(k, 0) + 1

    def check_alive(self, ra=None):
        if (ra and ra[0] == 'err' and ra[1] in ('ENOTCONN', 'ECONNABORTED')) or not self.fs.alive():
            rc = self.fs.proc.poll() if self.fs.proc else None
            raise Crash('sepfs daemon gone (rc=%s) result=%r' % (rc, ra))

    def remount(self):
        self.A.close_all()
        self.R.close_all()
        snap = {p: (st.st_mtime_ns, st.st_ctime_ns, oct(st.st_mode), st.st_nlink,
                    st.st_size if not stat.S_ISDIR(st.st_mode) else None)
                for p, st in walk(self.mnt).items()}
        self.fs.umount()
        rc, out = self.fs.fsck()
        if rc != 0:
            raise Diverge('fsck rc=%d: %s' % (rc, out[-3000:]))
        self.fs.mount()
        snap2 = {p: (st.st_mtime_ns, st.st_ctime_ns, oct(st.st_mode), st.st_nlink,
                     st.st_size if not stat.S_ISDIR(st.st_mode) else None)
                 for p, st in walk(self.mnt).items()}
        if snap != snap2:
            diffs = [(p, snap.get(p), snap2.get(p)) for p in sorted(set(snap) | set(snap2))
                     if snap.get(p) != snap2.get(p)]
            # Times included: what a stat showed must survive a remount.
            raise Diverge('sepfs attrs changed across remount (mtime,ctime,mode,nlink,size): %r'
                          % diffs[:10])
        probs = compare_tree(self.mnt, self.reftop, full=True)
        if probs:
            raise Diverge('after remount: %r' % probs[:10])

    def exec_op(self, op):
        kind = op[0]
        if kind == 'remount':
            self.remount()
            return
        if kind == 'checktree':
            probs = compare_tree(self.mnt, self.reftop)
            if probs:
                raise Diverge('tree: %r' % probs[:10])
            return
        ra = self.A.run(op)
        self.check_alive(ra)
        kk = (kind, ra[0] if ra[0] != 'err' else ra[1])
        self.kinds[kk] = self.kinds.get(kk, 0) + 1
        # documented / legitimate differences
        rr = self.R.run(op)
        if kind == 'seekdh':
            self.check_seekdh(op, ra, rr)
            return
        if kind == 'mtime_probe' and ra != rr and ra[:2] == rr[:2] and op[2][0] == 'fallocate' \
                and op[2][2] & FALLOC_FL_KEEP_SIZE:
            sz = os.fstat(self.R.fd(op[1])).st_size if self.R.fd(op[1]) is not None else 0
            if op[2][2] == FALLOC_FL_KEEP_SIZE or op[2][3] >= sz:
                self.note('mtime not updated by no-op fallocate KEEP_SIZE / punch past EOF (ext4 updates)')
                return
        if kind == 'mtime_probe' and ra != rr and ra[:2] == rr[:2] and op[2][0] == 'fallocate' \
                and op[2][2] == 0:
            sz = os.fstat(self.R.fd(op[1])).st_size if self.R.fd(op[1]) is not None else 0
            if op[2][3] + op[2][4] <= sz:
                self.note('mtime not updated by no-op fallocate KEEP_SIZE / punch past EOF (ext4 updates)')
                return
        if ra != rr:
            raise Diverge('result: sepfs=%r ref=%r' % (ra, rr))
        if kind == 'readdir_mutate' and ra[0] == 'ok' and ra[2]:
            raise Diverge('readdir violation: %r' % (ra[2],))
        # verify content of affected open files
        if kind == 'mtime_probe':
            self.check_slot(op[1], op[2])
        elif kind in FD_DATA_OPS or kind == 'cfr':
            slot = op[2] if kind == 'cfr' else op[1]
            self.check_slot(slot, op)
        elif kind in ('truncate',):
            self.check_path(op[1])

    def check_seekdh(self, op, ra, rr):
        slot, off, whence = op[1], op[2], op[3]
        fr = self.R.fd(slot)
        if fr is None or rr[0] == 'err' and rr[1] != 'ENXIO':
            if ra != rr:
                raise Diverge('seekdh: sepfs=%r ref=%r' % (ra, rr))
            return
        st = os.fstat(fr)
        if not stat.S_ISREG(st.st_mode):
            return
        size = st.st_size
        if off >= size:
            if ra != ('err', 'ENXIO'):
                raise Diverge('seekdh past EOF: sepfs=%r ref=%r' % (ra, rr))
            return
        if ra[0] == 'err':
            if ra == ('err', 'ENXIO') and whence == SEEK_DATA:
                d = read_range('/proc/self/fd/%d' % fr, off, size - off) if size - off < (64 << 20) else b''
                if d.count(0) == len(d):
                    return
            raise Diverge('seekdh: sepfs=%r ref=%r' % (ra, rr))
        pos = ra[1]
        if not (off <= pos <= size) or (whence == SEEK_DATA and pos == size):
            raise Diverge('seekdh out of range: sepfs=%r ref=%r size=%d' % (ra, rr, size))
        if whence == SEEK_DATA and pos - off < (64 << 20):
            d = read_range('/proc/self/fd/%d' % fr, off, pos - off)
            if d.count(0) != len(d):
                raise Diverge('SEEK_DATA skipped data: sepfs=%r ref=%r' % (ra, rr))

    def check_slot(self, slot, op):
        fa, fr = self.A.fd(slot), self.R.fd(slot)
        if fa is None or fr is None:
            return
        sa, sr = os.fstat(fa), os.fstat(fr)
        ka, kr = Side.stkey(sa), Side.stkey(sr)
        if ka != kr:
            raise Diverge('fstat after op: sepfs=%r ref=%r' % (ka, kr))
        if not blocks_sane(sa):
            self.note('st_blocks > roundup(size,64K) (dirty block double-counted)')
        if not stat.S_ISREG(sa.st_mode):
            return
        extra = []
        if op[0] in ('pwrite', 'fallocate', 'mmap_write'):
            o = op[2] if op[0] != 'fallocate' else op[3]
            extra = [(max(0, o - BS), 3 * BS)]
        d = compare_content('/proc/self/fd/%d' % fa, '/proc/self/fd/%d' % fr, sa.st_size, extra=extra)
        if d:
            raise Diverge('after op: ' + d)

    def check_path(self, rel):
        pa, pr = self.A.p(rel), self.R.p(rel)
        try:
            sr = os.stat(pr)
        except OSError:
            return
        sa = os.stat(pa)
        if Side.stkey(sa) != Side.stkey(sr):
            raise Diverge('stat after op: sepfs=%r ref=%r' % (Side.stkey(sa), Side.stkey(sr)))
        if stat.S_ISREG(sr.st_mode):
            d = compare_content(pa, pr, sr.st_size)
            if d:
                raise Diverge('after op: ' + d)


def run_ops(runner, ops, verbose=False):
    """Execute ops; returns (index, message) of the first divergence or None."""
    for i, op in enumerate(ops):
        runner.ops.append(op)
        try:
            runner.exec_op(op)
        except Diverge as e:
            return i, 'DIVERGE', str(e)
        except Crash as e:
            return i, 'CRASH', str(e)
        if verbose and i % 100 == 0:
            print('  op %d %s' % (i, op[0]), flush=True)
    return None


def cmd_run(a):
    seed = a.seed if a.seed is not None else random.randrange(1 << 31)
    print('seed %d ops %d opts %r' % (seed, a.ops, a.opts), flush=True)
    tag = 's%d' % seed
    r = Runner(tag, a.opts)
    r.setup()
    gen = Gen(random.Random(seed), r.R)
    faulthandler.dump_traceback_later(1800, exit=True)
    t0 = time.time()
    fail = None
    for i in range(a.ops):
        if i and i % a.remount_every == 0:
            op = ('remount',)
        elif i and i % 25 == 0:
            op = ('checktree',)
        else:
            try:
                op = gen.next()
            except Exception:
                import traceback
                fail = (i, 'TESTER-EXCEPTION', traceback.format_exc())
                break
        r.ops.append(op)
        try:
            r.exec_op(op)
        except Diverge as e:
            fail = (i, 'DIVERGE', str(e))
        except Crash as e:
            fail = (i, 'CRASH', str(e))
        except Exception as e:
            import traceback
            fail = (i, 'TESTER-EXCEPTION', traceback.format_exc())
        if fail:
            break
        if i % 500 == 0:
            print('  [%s] op %d (%.0fs)' % (tag, i, time.time() - t0), flush=True)
    if not fail:
        r.ops.append(('remount',))
        try:
            r.exec_op(('remount',))
        except (Diverge, Crash) as e:
            fail = (a.ops, 'DIVERGE', str(e))
    path = '%s/fail-%s.json' % (WORK, tag)
    if fail:
        with open(path, 'w') as f:
            json.dump({'seed': seed, 'opts': a.opts, 'fail': fail, 'ops': r.ops}, f)
        print('FAIL seed %d at op %d: %s %r\n  %s\n  log saved to %s' %
              (seed, fail[0], fail[1], r.ops[fail[0]], fail[2][:3000], path), flush=True)
        r.teardown(keep=True)
        return 1
    r.notes.update(NOTES)
    print('PASS seed %d: %d ops in %.0fs; notes %r' % (seed, a.ops, time.time() - t0, r.notes), flush=True)
    print('  result kinds: %r' % sorted(r.kinds.items()), flush=True)
    r.teardown()
    return 0


def tupleize(ops):
    out = []
    for o in ops:
        o = tuple(tuple(tuple(m) for m in x) if (isinstance(x, list) and x and isinstance(x[0], list)) else x
                  for x in o)
        out.append(o)
    return out


def replay(ops, opts, tag='replay'):
    r = Runner(tag, opts)
    r.setup()
    try:
        res = run_ops(r, ops)
    finally:
        r.teardown()
    return res


def cmd_replay(a):
    d = json.load(open(a.log))
    ops = tupleize(d['ops'])
    if a.upto is not None:
        ops = ops[:a.upto + 1]
    res = replay(ops, a.opts if a.opts is not None else d.get('opts', ''))
    print(res)
    return 0 if res is None else 1


def cmd_reduce(a):
    d = json.load(open(a.log))
    ops = tupleize(d['ops'])
    opts = a.opts if a.opts is not None else d.get('opts', '')
    fi = d['fail'][0]
    ops = ops[:fi + 1]
    target_kind = ops[-1][0]
    sig = d['fail'][1]

    def fails(cand):
        try:
            res = replay(cand, opts, 'reduce')
        except Exception as e:
            print('  exception', e)
            res = None
        ok = res is not None and res[0] == len(cand) - 1 and res[1] == sig and cand[-1][0] == target_kind
        print('  try %d ops -> %s' % (len(cand), 'FAIL' if ok else 'pass'), flush=True)
        return ok
    if not fails(ops):
        print('does not reproduce'); return 1
    # ddmin over all ops but the last
    body, last = ops[:-1], ops[-1]
    n = 2
    while len(body) >= 1:
        chunk = max(1, len(body) // n)
        reduced = False
        for i in range(0, len(body), chunk):
            cand = body[:i] + body[i + chunk:]
            if fails(cand + [last]):
                body = cand
                n = max(n - 1, 2)
                reduced = True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(body), n * 2)
    out = a.log.replace('.json', '.min.json')
    with open(out, 'w') as f:
        json.dump({'opts': opts, 'fail': d['fail'], 'ops': body + [last]}, f, indent=0)
    print('minimal: %d ops -> %s' % (len(body) + 1, out))
    for o in body + [last]:
        print('  ', o)
    return 0


def setup_ref(own_image=False):
    """Mounts the reference ext4 image at REFROOT unless FSX_REF names a
    directory (ignored with own_image)."""
    os.makedirs(WORK, exist_ok=True)
    if 'FSX_REF' in os.environ and not own_image:
        return
    img = WORK + '/ref.img'
    if not os.path.exists(img):
        with open(img, 'wb') as f:
            f.truncate(4 << 30)
        subprocess.run(['mkfs.ext4', '-q', '-F', '-O', 'ea_inode', img], check=True)
    os.makedirs(REFROOT, exist_ok=True)
    if subprocess.run(['mountpoint', '-q', REFROOT]).returncode != 0:
        subprocess.run(['mount', '-o', 'loop', img, REFROOT], check=True)


# The CI runs: (seed, mount options, mkfs arguments). The third makes GC
# and inline data work hard: 1 MiB segments, blocks up to 32 KiB inline.
CI_RUNS = [
    (101, '', []),
    (102, 'nowriteback', []),
    (103, '', ['--segment-size=1M', '--inline-max=32K']),
]


def cmd_ci(a):
    global WORK, REFROOT, MKFS_ARGS
    WORK = tempfile.mkdtemp(prefix='sepfs-fsx-ci.', dir='/var/tmp')
    REFROOT = WORK + '/ref'
    failed = []
    try:
        setup_ref(own_image=True)
        for seed, opts, mkfs in CI_RUNS:
            MKFS_ARGS = mkfs
            print('mkfs arguments %r' % mkfs, flush=True)
            run = argparse.Namespace(seed=seed, ops=a.ops, opts=opts, remount_every=300)
            if cmd_run(run) != 0:
                failed.append(seed)
    finally:
        if subprocess.run(['mountpoint', '-q', REFROOT]).returncode == 0:
            subprocess.run(['umount', REFROOT], check=True)
    if failed:
        print('fsx ci: seeds %r diverged; logs kept in %s' % (failed, WORK), flush=True)
        return 1
    shutil.rmtree(WORK)
    print('fsx ci: %d runs of %d operations, no divergence' % (len(CI_RUNS), a.ops))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest='cmd', required=True)
    p = sub.add_parser('run')
    p.add_argument('--seed', type=int)
    p.add_argument('--ops', type=int, default=3000)
    p.add_argument('--opts', default='')
    p.add_argument('--remount-every', type=int, default=300)
    p = sub.add_parser('replay')
    p.add_argument('log')
    p.add_argument('--opts')
    p.add_argument('--upto', type=int)
    p = sub.add_parser('reduce')
    p.add_argument('log')
    p.add_argument('--opts')
    p = sub.add_parser('ci')
    p.add_argument('--ops', type=int, default=2000)
    a = ap.parse_args()
    os.umask(0)
    if a.cmd != 'ci':
        setup_ref()
    sys.exit({'run': cmd_run, 'replay': cmd_replay, 'reduce': cmd_reduce,
              'ci': cmd_ci}[a.cmd](a))


if __name__ == '__main__':
    main()
