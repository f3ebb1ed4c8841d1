import { describe, expect, it } from 'vitest';
import { sshFailure, telltaleLine, type SshEnd } from '../../src/remote/failure.js';
import { parseSshTarget, sshArgv } from '../../src/remote/target.js';

describe('parseSshTarget', () => {
  it.each([
    ['ssh://box', { host: 'box' }],
    ['ssh://ann@box.example.org', { user: 'ann', host: 'box.example.org' }],
    ['ssh://ann@10.0.0.5:2222', { user: 'ann', host: '10.0.0.5', port: 2222 }],
    ['ssh://[::1]:22/', { host: '::1', port: 22 }],
    ['SSH://box', { host: 'box' }],
  ])('%s', (url, want) => {
    expect(parseSshTarget(url)).toEqual({ ...want, url });
  });

  it.each([
    ['box', /has no ssh:\/\/ in front/],
    ['http://box', /is not an ssh:\/\/ address/],
    ['ssh://', /names no host|not a valid address/],
    ['ssh://ann:secret@box', /has a password in it/],
    ['ssh://box/srv', /has a path/],
    ['ssh://box?x=1', /has a path, query or fragment/],
    ['ssh://box:99999', /not a valid address/],
    ['ssh://-oProxyCommand=sh', /starts a host or user with "-"/],
    ['ssh://-x@box', /starts a host or user with "-"/],
  ])('refuses %s, naming the form', (url, why) => {
    expect(() => parseSshTarget(url)).toThrow(why);
    expect(() => parseSshTarget(url)).toThrow('write the host as ssh://[user@]host[:port]');
  });
});

describe('sshArgv', () => {
  it('puts the port and user before the host, and quotes a socket for the far shell', () => {
    expect(sshArgv(['ssh', '-i', 'k'], parseSshTarget('ssh://ann@box:2222'))).toEqual(['ssh', '-i', 'k', '-p', '2222', 'ann@box', 'procctl', 'dial-stdio']);
    expect(sshArgv(['ssh'], parseSshTarget('ssh://box'), "/run/it's here.sock")).toEqual(['ssh', 'box', 'procctl', '--socket', `'/run/it'\\''s here.sock'`, 'dial-stdio']);
  });
});

describe('sshFailure', () => {
  const end = (over: Partial<SshEnd>): SshEnd => ({ where: 'ssh://box', host: 'box', login: 'box', code: 255, signal: null, stderr: '', received: 0, byHand: 'ssh box procctl dial-stdio', ...over });

  it('the host-key hint runs ssh as procctl does: the port and the user go with it', () => {
    const err = sshFailure(end({ where: 'ssh://ann@box:2222', login: '-p 2222 ann@box', stderr: 'Host key verification failed.' }));
    expect(err.hint).toBe('connect once with `ssh -p 2222 ann@box` to check and record its host key');
  });

  it('quotes the line that says what happened, not the routine warnings', () => {
    expect(telltaleLine("Warning: Permanently added 'box' (ED25519) to the list of known hosts.\r\nann@box: Permission denied (publickey).\r\n")).toBe('ann@box: Permission denied (publickey).');
  });

  it.each([
    ['ann@box: Permission denied (publickey).', 255, 'ssh could not log in: ann@box: Permission denied (publickey).', 'authorized_keys'],
    ['Host key verification failed.', 255, 'ssh does not trust the host key', 'record its host key'],
    ['ssh: Could not resolve hostname box: Name or service not known', 255, 'ssh cannot find the host', 'check the host name'],
    ['ssh: connect to host box port 22: Connection timed out', 255, 'ssh cannot connect', 'that sshd runs on box'],
    ['mux_client_request_session: something odd', 255, 'ssh failed: mux_client', 'run `ssh box procctl dial-stdio` by hand'],
    ['bash: line 1: procctl: command not found', 127, 'procctl cannot be run there', 'install procctl on box'],
    ['procctl: cannot reach procctld at /run/p.sock (no socket there); start it with …', 3, 'procctld is not running there: procctl: cannot reach', 'start procctld on box'],
    ["procctl: unknown command 'dial-stdio'", 2, 'the procctl there has no dial-stdio', 'update procctl on box'],
    ['', 0, 'the far side ended without a word from the daemon', 'forced command'],
  ])('%j (status %d) before any answer: a failed connect naming the fix', (stderr, code, reason, hint) => {
    const err = sshFailure(end({ stderr, code }));
    expect(err.phase).toBe('connect');
    expect(err.message).toContain(`cannot reach procctld at ssh://box (${reason}`);
    expect(err.hint).toContain(hint);
  });

  it('after an answer, the daemon closing or ssh failing is a lost connection', () => {
    expect(sshFailure(end({ code: 0, received: 10 })).message).toBe('lost the connection to procctld at ssh://box (the daemon closed it)');
    const dropped = sshFailure(end({ code: 255, received: 10, stderr: 'Connection to box closed by remote host.' }));
    expect(dropped.phase).toBe('lost');
    expect(dropped.message).toContain('ssh ended with status 255: Connection to box closed by remote host.');
  });
});
