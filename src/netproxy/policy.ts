import { BlockList, isIP } from 'node:net';
import type { NetworkPolicy } from '../config/schema.js';

export type ByName = Exclude<NetworkPolicy, boolean>;

/** Does `host` match a pattern: exactly, or as `*.domain` any name under the domain (not the domain itself). */
export function matches(host: string, pattern: string): boolean {
  if (pattern.startsWith('*.')) return host.endsWith(pattern.slice(1)) && host.length > pattern.length - 1;
  return host === pattern;
}

/** Why a destination name is refused, or undefined when the policy lets it through (`deny` wins). */
export function refusedName(host: string, p: ByName): string | undefined {
  const h = host.toLowerCase().replace(/\.$/, '');
  const denied = p.deny.find((pattern) => matches(h, pattern));
  if (denied) return `matches sandbox.network.deny ("${denied}")`;
  if (!p.allow.some((pattern) => matches(h, pattern))) return 'not in sandbox.network.allow';
  return undefined;
}

/** Addresses a name must not lead to unless it is named itself (SSRF: the host's own services, its network, the cloud's metadata). */
const INTERNAL = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
] as const)
  INTERNAL.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fd00:ec2::', 32],
] as const)
  INTERNAL.addSubnet(net, bits, 'ipv6');

/**
 * Why a resolved address is refused for `host`, or undefined. Loopback, private, link-local and
 * metadata addresses are reached only when the policy names them: the address itself, or the
 * host name exactly (a `*.domain` pattern is not enough).
 */
export function refusedAddress(host: string, address: string, p: ByName): string | undefined {
  const family = isIP(address);
  if (family === 0) return `"${address}" is not an address`;
  const mapped = family === 6 && address.toLowerCase().startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : undefined;
  const internal = mapped ? INTERNAL.check(mapped, 'ipv4') : INTERNAL.check(address, family === 4 ? 'ipv4' : 'ipv6');
  if (!internal) return undefined;
  const h = host.toLowerCase();
  if (p.allow.includes(address) || p.allow.includes(h)) return undefined;
  return `${host} resolves to ${address}, a loopback, private, link-local or metadata address; name it in sandbox.network.allow to reach it`;
}
