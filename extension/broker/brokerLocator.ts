// Finds which broker to talk to and its token, in the documented order:
// raySleuth.brokerAddress (+ tokenFile / RAYSLEUTH_TOKEN), else
// <stateDir>/broker.json. Reads files only; never starts anything. Every file is read only after
// fileTrust.ts's checks (the CLI's): a state dir, broker.json or token file that another user
// owns or can write is refused with an UntrustedFileError, and the token of a state dir is always
// its own `token` file, never the token_file that broker.json names.
import * as os from "os";
import * as path from "path";
import { BROKER_FILE, DEFAULT_STATE_DIR, TOKEN_ENV } from "../constants";
import { readBrokerFileText, readStateDirToken, readTokenFile } from "./fileTrust";
import { BrokerReadyInfo } from "./types";

export { UntrustedFileError } from "./fileTrust";

export interface LocatorSettings {
  brokerAddress: string;
  tokenFile: string;
  stateDir: string;
}

export interface BrokerLocation {
  url: string;
  token: string;
  /** Where the address came from, for the log and for error messages. */
  source: string;
  dap?: string;
}

/** No broker was found, or it was found without a usable token. */
export class BrokerNotFoundError extends Error {
  constructor(
    message: string,
    /** True when nothing names a broker at all (so offering to start one makes sense). */
    readonly nothingConfigured: boolean,
  ) {
    super(message);
    this.name = "BrokerNotFoundError";
  }
}

export function expandHome(p: string): string {
  if (p === "~") {
    return os.homedir();
  }
  if (p.startsWith("~/")) {
    return path.join(os.homedir(), p.slice(2));
  }
  return p;
}

export function resolveStateDir(setting: string): string {
  return path.resolve(expandHome(setting.trim() || DEFAULT_STATE_DIR));
}

/** The token of a token file named by the user (raySleuth.tokenFile): a plain file of theirs only they can read. */
export function readToken(file: string): string {
  return readTokenFile(expandHome(file));
}

/** Reads <stateDir>/broker.json after the state dir's and its own checks; undefined when it does not exist. */
export function readBrokerFile(stateDir: string): BrokerReadyInfo | undefined {
  const file = path.join(stateDir, BROKER_FILE);
  let text: string | undefined;
  try {
    text = readBrokerFileText(stateDir, BROKER_FILE);
  } catch (err) {
    if (err instanceof Error && err.name === "UntrustedFileError") {
      throw err;
    }
    throw new BrokerNotFoundError(`Cannot read ${file}: ${(err as Error).message}.`, false);
  }
  if (text === undefined) {
    return undefined;
  }
  let info: Partial<BrokerReadyInfo>;
  try {
    info = JSON.parse(text) as Partial<BrokerReadyInfo>;
  } catch {
    throw new BrokerNotFoundError(`${file} is not valid JSON. Restart the broker ("raysleuth broker") or delete the file.`, false);
  }
  if (!info.ready || typeof info.http !== "string" || typeof info.token_file !== "string") {
    throw new BrokerNotFoundError(`${file} does not describe a ready broker (needs "ready", "http" and "token_file").`, false);
  }
  return info as BrokerReadyInfo;
}

export function locateBroker(settings: LocatorSettings, env: NodeJS.ProcessEnv = process.env): BrokerLocation {
  const stateDir = resolveStateDir(settings.stateDir);
  const address = settings.brokerAddress.trim();
  if (address) {
    if (settings.tokenFile.trim()) {
      return { url: address, token: readToken(settings.tokenFile.trim()), source: "setting raySleuth.brokerAddress" };
    }
    const envToken = env[TOKEN_ENV]?.trim();
    if (envToken) {
      return { url: address, token: envToken, source: `setting raySleuth.brokerAddress (token from ${TOKEN_ENV})` };
    }
    const file = readBrokerFile(stateDir);
    if (file) {
      return { url: address, token: readStateDirToken(stateDir), source: `setting raySleuth.brokerAddress (token from the state dir ${stateDir})` };
    }
    throw new BrokerNotFoundError(
      `No token for the broker at ${address}: set raySleuth.tokenFile or the ${TOKEN_ENV} environment variable.`,
      false,
    );
  }
  const file = readBrokerFile(stateDir);
  if (!file) {
    throw new BrokerNotFoundError(
      `No Ray Sleuth broker found: raySleuth.brokerAddress is not set and ${path.join(stateDir, BROKER_FILE)} does not exist.`,
      true,
    );
  }
  const token = env[TOKEN_ENV]?.trim() || readStateDirToken(stateDir);
  return { url: file.http, token, source: path.join(stateDir, BROKER_FILE), dap: file.dap };
}
