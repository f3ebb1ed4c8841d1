import { describe, expect, it } from 'vitest';
import { listenTarget, ownAddress } from '../../src/console/listen.js';

describe('procctl ui --listen / --port', () => {
  it('is 127.0.0.1 and a free port by default; another loopback address or a socket path when asked', () => {
    expect(listenTarget(undefined, undefined)).toEqual({ where: { host: '127.0.0.1', port: 0 } });
    expect(listenTarget('127.0.0.2', 8080)).toEqual({ where: { host: '127.0.0.2', port: 8080 } });
    expect(listenTarget('::1', undefined)).toEqual({ where: { host: '::1', port: 0 } });
    expect(listenTarget('/run/user/1000/console.sock', undefined)).toEqual({ where: { path: '/run/user/1000/console.sock' } });
  });

  it('refuses what is not loopback, or not an address, naming the fix', () => {
    expect(() => listenTarget('0.0.0.0', undefined)).toThrow(/not a loopback address.*127\.0\.0\.1, ::1.*Unix socket path/);
    expect(() => listenTarget('192.168.1.4', 80)).toThrow(/not a loopback address/);
    expect(() => listenTarget('localhost', undefined)).toThrow(/takes a loopback IP address .* not "localhost"/);
    expect(() => listenTarget('/tmp/c.sock', 8080)).toThrow(/--port goes with a TCP address/);
  });

  it("answers to its own address and localhost on its port; a socket behind a proxy to the proxy's URL", () => {
    const own = ownAddress(listenTarget(undefined, undefined), 4321);
    expect([...own.hosts]).toEqual(['127.0.0.1:4321', 'localhost:4321']);
    expect([...own.origins]).toEqual(['http://127.0.0.1:4321', 'http://localhost:4321']);
    expect(own.url).toBe('http://127.0.0.1:4321/');
    expect([...ownAddress(listenTarget('::1', undefined), 99).hosts]).toEqual(['[::1]:99', 'localhost:99']);
    const proxied = ownAddress(listenTarget('/tmp/c.sock', undefined), 0, 'https://console.example.org');
    expect([...proxied.hosts]).toEqual(['console.example.org']);
    expect([...proxied.origins]).toEqual(['https://console.example.org']);
  });
});
