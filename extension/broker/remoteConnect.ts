// "Ray Sleuth: Connect to Remote Broker…": asks for the address of a broker on a
// remote head node (the local end of an ssh -L or kubectl port-forward tunnel)
// and a file holding its token, keeps both in the user settings
// (raySleuth.brokerAddress, raySleuth.tokenFile) and connects. Starts no tunnel.
import * as vscode from "vscode";
import { SETTINGS_SECTION, Settings } from "../constants";
import * as vsapi from "../common/vscodeapi";
import type { BrokerConnectionService } from "./brokerConnection";
import { readToken } from "./brokerLocator";
import { parseBrokerAddress } from "./remoteAddress";

/** Given by tests (and by anyone scripting the command); each one given is not asked for. */
export interface RemoteConnectArgs {
  address?: string;
  tokenFile?: string;
}

const DEFAULT_ADDRESS = "http://127.0.0.1:7311";

function tokenFileProblem(file: string): string | undefined {
  if (!file.trim()) {
    return "Name the file that holds the broker's token";
  }
  try {
    readToken(file.trim());
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

export class RemoteConnectService {
  /** How a bad address or token file is told (tests replace it to read the message). */
  showError: (message: string) => void = (message) => void vsapi.showErrorMessage(message);

  constructor(private readonly connection: BrokerConnectionService) {}

  /** Resolves true once connected; false when the user cancelled or the broker did not answer (told). */
  async command(args?: RemoteConnectArgs): Promise<boolean> {
    const current = vsapi.getSetting<string>(Settings.brokerAddress, "");
    const typed =
      args?.address ??
      (await vscode.window.showInputBox({
        title: "Ray Sleuth: Connect to Remote Broker (1/2)",
        prompt:
          "The broker's address as this machine reaches it: the local end of your tunnel, e.g. after " +
          "`ssh -L 7311:127.0.0.1:7311 head-node` or `kubectl port-forward pod/<head pod> 7311`",
        value: current || DEFAULT_ADDRESS,
        ignoreFocusOut: true,
        validateInput: (v) => {
          const parsed = parseBrokerAddress(v);
          return "error" in parsed ? parsed.error : undefined;
        },
      }));
    if (typed === undefined) {
      return false;
    }
    const parsed = parseBrokerAddress(typed);
    if ("error" in parsed) {
      this.showError(`Ray Sleuth: ${parsed.error}`);
      return false;
    }
    const tokenFile =
      args?.tokenFile ??
      (await vscode.window.showInputBox({
        title: "Ray Sleuth: Connect to Remote Broker (2/2)",
        prompt: "A file on this machine holding the broker's token: a copy of the head node's ~/.raysleuth/token (keep it mode 600)",
        value: vsapi.getSetting<string>(Settings.tokenFile, "") || "~/.raysleuth/remote-token",
        ignoreFocusOut: true,
        validateInput: tokenFileProblem,
      }));
    if (tokenFile === undefined) {
      return false;
    }
    const problem = tokenFileProblem(tokenFile);
    if (problem) {
      this.showError(`Ray Sleuth: ${problem}`);
      return false;
    }
    const settings = vscode.workspace.getConfiguration(SETTINGS_SECTION);
    await settings.update(Settings.brokerAddress, parsed.url, vscode.ConfigurationTarget.Global);
    await settings.update(Settings.tokenFile, tokenFile.trim(), vscode.ConfigurationTarget.Global);
    const location = { url: parsed.url, token: readToken(tokenFile.trim()), source: "Connect to Remote Broker" };
    const ok = await vsapi.withProgress(`Ray Sleuth: connecting to the broker at ${parsed.url}…`, () =>
      this.connection.connectTo(location, { interactive: true }),
    );
    if (ok) {
      void vsapi.setStatusBarMessage(`Ray Sleuth: connected to ${parsed.url}`, 5000);
    }
    return ok;
  }
}
