"""Renders alerts.yml from alerts.template.yml: the gateway's series selector, the runbooks' and the dashboard's
addresses are the deployment's, set here once. The SLO recording rules for every window come from one pattern.
    python3 deploy/prometheus/render.py [--selector 'job="desk-gateway"'] [--runbooks URL] [--dashboard URL] [--check]
--check exits 1 when deploy/prometheus/alerts.yml differs from the default rendering (make test runs it)."""
import argparse
import pathlib
import sys

here = pathlib.Path(__file__).resolve().parent
API = 'route=~"/v1/(sessions|tickets|operations|customers|link-previews|messages).*"'
WINDOWS = ["5m", "30m", "1h", "6h", "3d"]


def windows(selector):
    lines = []
    for window in WINDOWS:
        lines += [
            f"      - record: desk_gateway:api_errors:ratio_rate{window}",
            f"        expr: |",
            f"          (sum(rate(http_requests_total{{{selector}, {API}, status=~\"5..\"}}[{window}]))",
            f"             or 0 * sum(rate(http_requests_total{{{selector}, {API}}}[{window}])))",
            f"            / sum(rate(http_requests_total{{{selector}, {API}}}[{window}]))",
            f"      - record: desk_gateway:api_slow:ratio_rate{window}",
            f"        expr: |",
            f"          1 - sum(rate(http_request_duration_seconds_bucket{{{selector}, {API}, le=\"0.25\"}}[{window}]))",
            f"            / sum(rate(http_request_duration_seconds_count{{{selector}, {API}}}[{window}]))",
        ]
    return "\n".join(lines)


def render(selector, runbooks, dashboard):
    text = (here / "alerts.template.yml").read_text()
    text = text.replace("@WINDOWS@", windows("@SELECTOR@"))
    return text.replace("@SELECTOR@", selector).replace("@RUNBOOKS@", runbooks).replace("@DASHBOARD@", dashboard)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--selector", default='job="desk-gateway"')
    parser.add_argument("--runbooks", default="docs/runbooks.md")
    parser.add_argument("--dashboard", default="/d/desk-gateway/desk-gateway")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = render(args.selector, args.runbooks, args.dashboard)
    if args.check:
        same = (here / "alerts.yml").read_text() == text
        print("alerts.yml is the default rendering" if same else "alerts.yml differs from alerts.template.yml: run deploy/prometheus/render.py")
        return 0 if same else 1
    (here / "alerts.yml").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
