import type { Task } from './agent.js';
import { catEof, promptResume, ptyPrompt, readWrite } from './tasks/input.js';
import { backgroundPolled, bigOutput, execExitCode, execNotFound, execOutput, ptyOutput } from './tasks/output.js';
import { cancelByClose, checkpoint, kill, killStubborn, refusals, removeRunning, signalTrap, threadKey, timeout } from './tasks/stop.js';

/** What an agent does, and how often relative to the rest. */
export const MIX: [string, number, Task][] = [
  ['exec-output', 24, execOutput],
  ['exec-exit-code', 8, execExitCode],
  ['exec-not-found', 3, execNotFound],
  ['background-polled', 12, backgroundPolled],
  ['big-output', 4, bigOutput],
  ['pty-output', 5, ptyOutput],
  ['pty-prompt', 4, ptyPrompt],
  ['prompt-resume', 6, promptResume],
  ['read-write', 5, readWrite],
  ['cat-eof', 4, catEof],
  ['kill', 5, kill],
  ['kill-stubborn', 2, killStubborn],
  ['timeout', 3, timeout],
  ['thread-key', 5, threadKey],
  ['remove-running', 3, removeRunning],
  ['cancel-by-close', 2, cancelByClose],
  ['signal', 2, signalTrap],
  ['checkpoint', 2, checkpoint],
  ['refusals', 2, refusals],
];
