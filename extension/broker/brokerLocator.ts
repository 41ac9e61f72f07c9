// Finds which broker to talk to and its token, in the documented order:
// raySleuth.brokerAddress (+ tokenFile / RAYSLEUTH_TOKEN), else
// <stateDir>/broker.json. Reads files only; never starts anything.
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { BROKER_FILE, DEFAULT_STATE_DIR, TOKEN_ENV } from "../constants";
import { BrokerReadyInfo } from "./types";

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

export function readToken(file: string): string {
  let text: string;
  try {
    text = fs.readFileSync(expandHome(file), "utf8");
  } catch (err) {
    throw new BrokerNotFoundError(`Cannot read the broker token file ${file}: ${(err as Error).message}.`, false);
  }
  const token = text.trim();
  if (!token) {
    throw new BrokerNotFoundError(`The broker token file ${file} is empty.`, false);
  }
  return token;
}

/** Reads <stateDir>/broker.json; undefined when it does not exist. */
export function readBrokerFile(stateDir: string): BrokerReadyInfo | undefined {
  const file = path.join(stateDir, BROKER_FILE);
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      return undefined;
    }
    throw new BrokerNotFoundError(`Cannot read ${file}: ${(err as Error).message}.`, false);
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
      return { url: address, token: readToken(file.token_file), source: `setting raySleuth.brokerAddress (token from ${path.join(stateDir, BROKER_FILE)})` };
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
  const token = env[TOKEN_ENV]?.trim() || readToken(file.token_file);
  return { url: file.http, token, source: path.join(stateDir, BROKER_FILE), dap: file.dap };
}
