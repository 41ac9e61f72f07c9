// The report of `raysleuth doctor` (GET /v1/doctor) as the Doctor panel shows
// it: the broker's checks, then every node's, failures and warnings with their
// hint. Pure text, no vscode import.
import { escapeHtml, page } from "./html";

export type CheckStatus = "ok" | "info" | "warn" | "fail";

/** One check, as raysleuth/probes/checks.py and the broker's radar/doctor.py write it. */
export interface DoctorCheck {
  check: string;
  status: CheckStatus | string;
  detail: string;
  hint?: string | null;
}

export interface DoctorReport {
  ok: boolean;
  broker?: DoctorCheck[];
  nodes?: { node_id: string; node_ip: string; checks?: DoctorCheck[] }[];
}

const MARK: Record<string, string> = { ok: "✓", info: "i", warn: "⚠", fail: "✗" };

export function doctorSections(report: DoctorReport): { title: string; checks: DoctorCheck[] }[] {
  return [
    { title: "Broker", checks: report.broker ?? [] },
    ...(report.nodes ?? []).map((n) => ({ title: `Node ${n.node_ip} (${String(n.node_id).slice(0, 6)})`, checks: n.checks ?? [] })),
  ];
}

/** "all good", or how many checks failed and warned. */
export function doctorSummary(report: DoctorReport): string {
  const all = doctorSections(report).flatMap((s) => s.checks);
  const fail = all.filter((c) => c.status === "fail").length;
  const warn = all.filter((c) => c.status === "warn").length;
  return report.ok && !warn ? `all good (${all.length} checks)` : `${fail} failed, ${warn} warning${warn === 1 ? "" : "s"} (${all.length} checks)`;
}

export function doctorHtml(report: DoctorReport, when: Date): string {
  const sections = doctorSections(report)
    .map((s) => {
      const rows = s.checks
        .map((c) => {
          const hint = c.hint && (c.status === "warn" || c.status === "fail") ? `<div class="hint">${escapeHtml(c.hint)}</div>` : "";
          return (
            `<tr class="${escapeHtml(String(c.status))}"><td class="mark">${escapeHtml(MARK[c.status] ?? c.status)}</td>` +
            `<td>${escapeHtml(c.check)}</td><td>${escapeHtml(c.detail)}${hint}</td></tr>`
          );
        })
        .join("\n");
      return `<h2>${escapeHtml(s.title)}</h2><table><tbody>${rows || '<tr><td colspan="3">no checks</td></tr>'}</tbody></table>`;
    })
    .join("\n");
  const meta = `${doctorSummary(report)} · ${when.toISOString().slice(0, 19).replace("T", " ")} UTC · the same report as \`raysleuth doctor\``;
  const extra = `<style>tr.fail td { color: var(--vscode-errorForeground); } tr.warn td.mark { color: var(--vscode-editorWarning-foreground); }
tr.ok td.mark { color: var(--vscode-testing-iconPassed, #3a3); } .hint { color: var(--vscode-descriptionForeground); margin-top: 2px; }
td { white-space: normal; }</style>`;
  return page("Ray Sleuth: Doctor", `${extra}<div class="meta">${escapeHtml(meta)}</div>${sections}`);
}
