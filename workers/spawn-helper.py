# The posix_spawn spawn helper: what workers/spawn-helper.ts does, without
# forking a Node process for every tool process.
#
# Why: Linux fork copies the page tables of the forking process, and the
# child pays again to tear that copy down at exec. From a bare Node (~40 MiB)
# that is ~0.4 ms of the helper's CPU and ~0.8 ms of the child's per spawn;
# posix_spawn (glibc: clone with CLONE_VM|CLONE_VFORK) shares the address
# space until exec and costs ~0.035 ms whatever the size (docs/benchmarks.md,
# "Small calls and spawning"). Python's os.posix_spawn is that call.
#
# The protocol is the Node helper's, over the Node IPC channel the worker
# opened (fd NODE_CHANNEL_FD, one JSON document per line): in
# {t:'env', env} once, first (the tools' environment), then
# {t:'spawn', id, file, args, cwd}; out {t:'ready'}, then per request
# {t:'out', id, pid} with the stdout socket, {t:'err', id} with the stderr
# socket, {t:'exit', id, code, signal}, or {t:'error', id, code, message}.
# A socket travels as Node's NODE_HANDLE message (the descriptor as
# SCM_RIGHTS); the next one waits for the receiver's NODE_HANDLE_ACK, as
# Node's own sender does.
#
# What a tool process gets is what a Node spawn gives it: its own session
# (detached), stdin /dev/null, stdout and stderr a socket each, every signal
# at its default and none blocked, the environment the worker sent (its
# own: this process's came through sh, which drops names it cannot hold)
# plus SLUICE_SPAWN_MARK.
#
# This process lives exactly as long as its channel: at end of file (the
# worker ended, or the engine died, even by SIGKILL) or on SIGTERM it
# SIGKILLs every group it started that has not exited, and exits.
#
# It runs as `python3 -I -S -B`: no site packages, no PYTHON* variables, no
# bytecode written. Without posix_spawn, setsid or pidfd_open (Python < 3.9,
# Linux < 5.3, glibc < 2.26), or where a failed exec is not reported as the
# spawn's error (glibc < 2.24), it exits before saying it is ready, and its
# thread uses the Node helper instead.
import array
import collections
import errno
import json
import os
import selectors
import signal
import socket
import sys
import traceback

# Every catchable signal back to its default in the tool process (an ignored one stays ignored
# across exec, and Python ignores SIGPIPE), and an empty mask: what libuv gives a child.
DEFAULT_SIGNALS = [s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)]
# argv: sluice-spawner <engine pid> <mark> (the first two for `ps`).
MARK = os.fsencode(sys.argv[3]) if len(sys.argv) > 3 else None


def spawn(file, args, env, out_fd, err_fd):
    """posix_spawnp as every tool process is started: its own session, stdin /dev/null, the given stdout and stderr."""
    return os.posix_spawnp(
        file,
        args,
        env,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, '/dev/null', os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out_fd, 1),
            (os.POSIX_SPAWN_DUP2, err_fd, 2),
        ],
        setsid=True,
        setsigdef=DEFAULT_SIGNALS,
        setsigmask=[],
    )


def startup():
    """The channel, or exit 3 (quietly) when this Python cannot serve."""
    try:
        fd = int(os.environ['NODE_CHANNEL_FD'])
        probe = os.pidfd_open(os.getpid())
        os.close(probe)
        # What every spawn relies on, tried once with the same attributes: setsid needs glibc 2.26
        # (Python raises NotImplementedError without it), and a failed exec must be the spawn's
        # error (glibc 2.24), not a child that exits 127. A file that is not there costs no exec.
        try:
            pid = spawn('/nonexistent/sluice-spawn-probe', ['probe'], {}, 1, 2)
        except FileNotFoundError:
            pass
        else:
            os.waitpid(pid, 0)
            raise OSError(errno.ENOSYS, 'exec failures not reported')
    except (KeyError, ValueError, AttributeError, NotImplementedError, OSError):
        sys.exit(3)
    # Holding no directory busy (each spawn changes to its own and back).
    os.chdir('/')
    os.set_inheritable(fd, False)
    channel = socket.socket(fileno=fd)
    channel.setblocking(True)
    return channel


channel = startup()
# The tools' environment: the worker's, sent before any request ({t:'env'}).
tool_env = None
# Tests only (as in the Node helper): start processes and never report them.
STALL = os.environ.get('SLUICE_SPAWN_HELPER_STALL') == '1' and 'VITEST' in os.environ
# Blocked while a process is started and recorded, and while one is reaped and forgotten: SIGTERM's
# handler runs between any two bytecodes, and there it would miss a process just started, or
# signal the group of a pid already reaped (and perhaps reused).
TERM = {signal.SIGTERM}

selector = selectors.DefaultSelector()
selector.register(channel, selectors.EVENT_READ, None)
# Group leader pid -> (request id, pidfd), until it has exited and been reaped.
live = {}
# Messages not yet sent (behind a socket waiting for its acknowledgement), in order.
outbox = collections.deque()
# The socket message sent and not yet acknowledged: [message, socket, retransmissions].
in_flight = None
# As Node's sender: a socket refused this many times more ends the channel.
MAX_HANDLE_RETRANSMISSIONS = 3
# Started processes with no pidfd (descriptors ran out): polled instead.
unwatched = set()


def kill_all_and_exit(*_):
    for pid in list(live):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(0)


def flush():
    """Sends what waits, stopping at a socket until the receiver has acknowledged it."""
    global in_flight
    while outbox and in_flight is None:
        message, sock = outbox.popleft()
        try:
            if sock is None:
                channel.sendall(json.dumps(message, separators=(',', ':')).encode() + b'\n')
                continue
            in_flight = [message, sock, 0]
            send_handle(message, sock)
        except OSError:
            # The channel is gone: as at its end of file.
            kill_all_and_exit()


def send_handle(message, sock):
    data = json.dumps({'cmd': 'NODE_HANDLE', 'type': 'net.Socket', 'msg': message}, separators=(',', ':'))
    data = data.encode() + b'\n'
    fds = array.array('i', [sock.fileno()])
    # The descriptor goes with the first byte; a short send's rest follows without it.
    sent = channel.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    if sent < len(data):
        channel.sendall(data[sent:])


def acknowledged(ok):
    """The receiver's NODE_HANDLE_ACK (it has its own descriptor now) or NACK (it got none: sent again, as Node does)."""
    global in_flight
    if in_flight is None:
        return
    message, sock, tries = in_flight
    if not ok and tries < MAX_HANDLE_RETRANSMISSIONS:
        in_flight[2] = tries + 1
        try:
            send_handle(message, sock)
        except OSError:
            kill_all_and_exit()
        return
    # Closed here, so end of file reaches the worker when the tool's group closes the socket. A socket
    # refused every time leaves a call nobody can finish: this helper ends, and its calls fail with it.
    sock.close()
    in_flight = None
    if not ok:
        kill_all_and_exit()
    flush()


def send(message, sock=None):
    outbox.append((message, sock))
    flush()


def node_text(value):
    """A string from JSON as Node would pass it to exec: UTF-8, a lone surrogate as U+FFFD."""
    return value.encode('utf-16', 'surrogatepass').decode('utf-16', 'replace').encode('utf-8')


# The spawn errors Node reports as 'spawn <file> <code>' (emitted); others it throws as 'spawn <code>'.
ASYNC_ERRORS = ('EACCES', 'EAGAIN', 'EMFILE', 'ENFILE', 'ENOENT')


def set_env(request):
    """The tools' environment from the worker's: as Node would pass it (names it could not pass are left out)."""
    global tool_env
    env = {}
    for name, value in request['env'].items():
        if not isinstance(value, str) or name == '' or '=' in name or '\0' in name or '\0' in value:
            continue
        env[node_text(name)] = node_text(value)
    if MARK is not None:
        env[b'SLUICE_SPAWN_MARK'] = MARK
    tool_env = env


def start_process(rid, file, args, cwd):
    """Starts one tool process in `cwd` and records it: (pid, pidfd, stdout end, stderr end). On failure nothing stays open or changed."""
    # The worker sends an absolute directory; this process is the only one here, so changing its own
    # directory for the spawn is safe. It goes back to / after, holding no directory busy.
    os.chdir(cwd)
    opened = []
    try:
        parent_out, child_out = socket.socketpair()
        opened += [parent_out, child_out]
        parent_err, child_err = socket.socketpair()
        opened += [parent_err, child_err]
        # The worker's ends must not block: the descriptor passed is the same open file, flags and
        # all, and libuv reads until EAGAIN. A blocking one held the worker thread in read() on a
        # quiet stream while the other filled up. The tool's ends block, as Node gives them.
        parent_out.setblocking(False)
        parent_err.setblocking(False)
        signal.pthread_sigmask(signal.SIG_BLOCK, TERM)
        try:
            pid = spawn(file, args, tool_env, child_out.fileno(), child_err.fileno())
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                pidfd = None
            live[pid] = (rid, pidfd)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, TERM)
    except BaseException:
        for sock in opened:
            sock.close()
        raise
    finally:
        os.chdir('/')
    # The tool has its own copies.
    child_out.close()
    child_err.close()
    return pid, pidfd, parent_out, parent_err


def start(request):
    rid = request.get('id')
    try:
        if tool_env is None:
            raise ValueError('no environment before the first request')
        file = node_text(request['file'])
        args = [file] + [node_text(a) for a in request['args']]
        pid, pidfd, parent_out, parent_err = start_process(rid, file, args, node_text(request['cwd']))
    except OSError as e:
        code = errno.errorcode.get(e.errno) if e.errno is not None else None
        # Node's wording: these five are reported with the file, the rest (E2BIG, ...) without.
        what = f'spawn {request.get("file")}' if code in ASYNC_ERRORS else 'spawn'
        send({'t': 'error', 'id': rid, 'code': code, 'message': f'{what} {code}'})
        return
    except (ValueError, TypeError, KeyError) as e:
        # An embedded NUL, a malformed request: what Node's spawn throws for such arguments.
        send({'t': 'error', 'id': rid, 'code': 'ERR_INVALID_ARG_VALUE', 'message': str(e)})
        return
    except Exception as e:
        # Anything else this Python raises (a bug, or a platform it cannot serve after all): this
        # request fails with its reason; the helper goes on.
        send({'t': 'error', 'id': rid, 'code': None, 'message': f'spawn failed: {e!r}'})
        return
    if STALL:
        return
    if pidfd is not None:
        selector.register(pidfd, selectors.EVENT_READ, pid)
    send({'t': 'out', 'id': rid, 'pid': pid}, parent_out)
    send({'t': 'err', 'id': rid}, parent_err)
    if pidfd is None:
        # No descriptor for it (out of them): its end is polled for.
        unwatched.add(pid)


def signal_name(n):
    """SIGTERM, SIGRTMIN+2, ...: a name for every signal, so an end by a real-time one is not taken for exit 0."""
    try:
        return signal.Signals(n).name
    except ValueError:
        pass
    if signal.SIGRTMIN < n < signal.SIGRTMAX:
        return f'SIGRTMIN+{n - signal.SIGRTMIN}'
    return f'SIG{n}'


def reap(pid, flags):
    rid, pidfd = live[pid]
    signal.pthread_sigmask(signal.SIG_BLOCK, TERM)
    try:
        try:
            done, status = os.waitpid(pid, flags)
        except ChildProcessError:
            # Reaped by someone else (this process does not do that): how it ended is unknown.
            done, status = pid, None
        if done == 0:
            return
        del live[pid]
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, TERM)
    unwatched.discard(pid)
    if pidfd is not None:
        selector.unregister(pidfd)
        os.close(pidfd)
    code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else None
    name = signal_name(os.WTERMSIG(status)) if status is not None and os.WIFSIGNALED(status) else None
    send({'t': 'exit', 'id': rid, 'code': code, 'signal': name})


def main():
    for s in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(s, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, kill_all_and_exit)
    pending = bytearray()
    send({'t': 'ready'})
    while True:
        for pid in list(unwatched):
            reap(pid, os.WNOHANG)
        for key, _ in selector.select(0.05 if unwatched else None):
            if key.data is not None:
                reap(key.data, os.WNOHANG)
                continue
            try:
                data = channel.recv(262144)
            except OSError:
                data = b''
            if not data:
                kill_all_and_exit()
            start_at = len(pending)
            pending += data
            end = pending.find(b'\n', start_at)
            while end != -1:
                line = bytes(pending[:end])
                del pending[: end + 1]
                message = json.loads(line)
                if not isinstance(message, dict):
                    pass
                elif message.get('cmd') in ('NODE_HANDLE_ACK', 'NODE_HANDLE_NACK'):
                    acknowledged(message['cmd'] == 'NODE_HANDLE_ACK')
                elif message.get('t') == 'spawn':
                    start(message)
                elif message.get('t') == 'env':
                    set_env(message)
                end = pending.find(b'\n')


try:
    main()
except BaseException:
    # A bug here must not leave processes running unwatched: what it started goes with it.
    traceback.print_exc()
    kill_all_and_exit()
