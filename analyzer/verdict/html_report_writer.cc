#include "hangwatch/verdict/gpu_ranks.h"
#include "hangwatch/verdict/html_report_writer.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>

#include "wording_text.h"

#include "hangwatch/verdict/text_report_writer.h"
#include "hangwatch/verdict/verdict_wording.h"

namespace hangwatch::verdict {
namespace {

using Out = std::back_insert_iterator<std::string>;

constexpr int kRingMaxNodes = 48;  // a bigger ring shows the culprit's neighbourhood only
constexpr int kHtmlGridColumns = 32;
constexpr int kHtmlGridMaxRanks = 16384;
constexpr const char* kMissingColour = "#e0e0e0";
constexpr const char* kSuspectColour = "#b8860b";  // a culprit the data cannot rule out: amber, never red

std::string esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

bool isCulprit(const Verdict& v, int rank) {
  return !v.culprit_link && std::find(v.culprit_ranks.begin(), v.culprit_ranks.end(), rank) != v.culprit_ranks.end();
}

bool isSuspectLink(const Verdict& v, int from, int to) {
  return std::any_of(v.suspects.begin(), v.suspects.end(), [&](const Suspect& s) {
    return s.link && s.link->from == from && (s.link->to == to || s.link->to < 0);
  });
}

bool isSuspectRank(const Verdict& v, int rank) {
  return std::any_of(v.suspects.begin(), v.suspects.end(), [&](const Suspect& s) {
    return !s.link && std::find(s.ranks.begin(), s.ranks.end(), rank) != s.ranks.end();
  });
}

std::string fillOf(const Report& r, int rank) {
  int c = rank >= 0 && rank < static_cast<int>(r.rank_class.size()) ? r.rank_class[rank] : -1;
  return c < 0 ? kMissingColour : HtmlReportWriter::classColour(c);
}

// The ring members to draw: all of them, or a window around the culprit.
std::vector<int> ringWindow(const Report& r) {
  const std::vector<int>& ring = r.ring_order;
  if (static_cast<int>(ring.size()) <= kRingMaxNodes) return ring;
  int centre = 0;
  const Verdict& v = r.verdict;
  int target = v.culprit_link ? v.culprit_link->from : (v.culprit_ranks.empty() ? ring.front() : v.culprit_ranks.front());
  for (size_t i = 0; i < ring.size(); ++i) {
    if (ring[i] == target) centre = static_cast<int>(i);
  }
  std::vector<int> out;
  for (int k = -kRingMaxNodes / 2; k < kRingMaxNodes / 2; ++k) {
    out.push_back(ring[(centre + k + ring.size()) % ring.size()]);
  }
  return out;
}

// A shaded arc behind each node's run of ring members, with the host's name outside it.
void nodeArcs(Out o, const Report& r, const std::vector<int>& ring, double cx, double cy, double radius, bool partial) {
  if (r.nodes.size() < 2) return;
  const size_t n = ring.size();
  auto angle = [&](double i) { return -M_PI / 2 + 2 * M_PI * i / static_cast<double>(n); };
  size_t start = 0;
  // Begin at a change of host, so that no run wraps around the start (a full ring).
  if (!partial) {
    for (size_t i = 0; i < n; ++i)
      if (hostOf(r.job, ring[i]) != hostOf(r.job, ring[(i + n - 1) % n])) {
        start = i;
        break;
      }
  }
  int shade = 0;
  for (size_t k = 0; k < n;) {
    const size_t first = (start + k) % n;
    const std::string host = hostOf(r.job, ring[first]);
    size_t len = 1;
    while (k + len < n && hostOf(r.job, ring[(start + k + len) % n]) == host) ++len;
    k += len;
    if (host.empty()) continue;
    const double a0 = angle(static_cast<double>(first) - 0.42), a1 = angle(static_cast<double>(first + len - 1) + 0.42);
    const double big = a1 - a0 > M_PI ? 1 : 0;
    fmt::format_to(o,
                   "<path class=\"node\" d=\"M{:.1f},{:.1f} A{:.0f},{:.0f} 0 {} 1 {:.1f},{:.1f}\" fill=\"none\" "
                   "stroke=\"{}\" stroke-width=\"34\" stroke-linecap=\"round\"><title>{}</title></path>\n",
                   cx + radius * std::cos(a0), cy + radius * std::sin(a0), radius, radius, big,
                   cx + radius * std::cos(a1), cy + radius * std::sin(a1), shade++ % 2 ? "#eef3fb" : "#f6efe2", esc(host));
    const double am = (a0 + a1) / 2, lr = radius - 42;
    fmt::format_to(o,
                   "<text class=\"host\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"12\" "
                   "fill=\"#555\">{}</text>\n",
                   cx + lr * std::cos(am), cy + lr * std::sin(am) + 4, esc(host));
  }
}

void ringSvg(Out o, const Report& r) {
  std::vector<int> ring = ringWindow(r);
  if (ring.size() < 2) return;
  const Verdict& v = r.verdict;
  const double cx = 260, cy = 250, radius = 190;
  const double node = ring.size() > 24 ? 9 : 16;
  bool partial = ring.size() < r.ring_order.size();
  fmt::format_to(o,
                 "<h2>Ring of communicator {}{}</h2>\n<svg id=\"ring\" xmlns=\"http://www.w3.org/2000/svg\" width=\"520\" "
                 "height=\"500\" viewBox=\"0 0 520 500\">\n"
                 "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" "
                 "orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#555\"/></marker>"
                 "<marker id=\"arrowbad\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"5\" markerHeight=\"5\" "
                 "orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"{}\"/></marker>"
                 "<marker id=\"arrowsuspect\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"5\" "
                 "markerHeight=\"5\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" "
                 "fill=\"{}\"/></marker></defs>\n",
                 esc(r.focus ? r.focus->comm : ""), partial ? " (around the culprit)" : "",
                 HtmlReportWriter::kCulpritColour, kSuspectColour);
  auto pos = [&](size_t i) {
    double a = -M_PI / 2 + 2 * M_PI * static_cast<double>(i) / static_cast<double>(ring.size());
    return std::pair<double, double>{cx + radius * std::cos(a), cy + radius * std::sin(a)};
  };
  size_t edges = partial ? ring.size() - 1 : ring.size();
  nodeArcs(o, r, ring, cx, cy, radius, partial);
  for (size_t i = 0; i < edges; ++i) {
    auto [x1, y1] = pos(i);
    auto [x2, y2] = pos((i + 1) % ring.size());
    double dx = x2 - x1, dy = y2 - y1, len = std::sqrt(dx * dx + dy * dy);
    if (len < 1) continue;
    double ux = dx / len, uy = dy / len;
    const int a = ring[i], b = ring[(i + 1) % ring.size()];
    bool bad = v.culprit_link && v.culprit_link->from == a && v.culprit_link->to == b;
    bool suspect = !bad && isSuspectLink(v, a, b);
    const std::string ha = hostOf(r.job, a), hb = hostOf(r.job, b);
    // A network link (between nodes) bows outward, apart from the links inside a node.
    const bool network = !ha.empty() && !hb.empty() && ha != hb;
    const double sx = x1 + ux * (node + 2), sy = y1 + uy * (node + 2), ex = x2 - ux * (node + 3), ey = y2 - uy * (node + 3);
    const double mx = (sx + ex) / 2, my = (sy + ey) / 2, bow = network ? std::max(18.0, len * 0.35) : 0;
    const double ox = (mx - cx) / std::max(1.0, std::hypot(mx - cx, my - cy)), oy = (my - cy) / std::max(1.0, std::hypot(mx - cx, my - cy));
    fmt::format_to(o,
        "<path class=\"{}\" d=\"M{:.1f},{:.1f} Q{:.1f},{:.1f} {:.1f},{:.1f}\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"{}\"{} marker-end=\"url(#{})\"><title>{} -&gt; {}{}{}</title></path>\n",
        network ? "net" : "p2p", sx, sy, mx + ox * bow, my + oy * bow, ex, ey,
        bad ? HtmlReportWriter::kCulpritColour : suspect ? kSuspectColour : network ? "#1f4e9c" : "#555",
        bad || suspect ? 8 : 2, suspect ? " stroke-dasharray=\"10 5\"" : network && !bad ? " stroke-dasharray=\"6 3\"" : "",
        bad ? "arrowbad" : suspect ? "arrowsuspect" : "arrow", a, b,
        network ? esc(" (network: " + ha + " -> " + hb + ")") : "", bad ? ": culprit link" : suspect ? ": suspect" : "");
  }
  for (size_t i = 0; i < ring.size(); ++i) {
    auto [x, y] = pos(i);
    bool bad = isCulprit(v, ring[i]);
    bool suspect = !bad && isSuspectRank(v, ring[i]);
    fmt::format_to(o,
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{:.0f}\" fill=\"{}\" stroke=\"{}\" stroke-width=\"{}\">"
        "<title>{}</title></circle>\n",
        x, y, node, bad ? HtmlReportWriter::kCulpritColour : fillOf(r, ring[i]),
        bad ? "#000" : suspect ? kSuspectColour : "#333", bad || suspect ? 3 : 1,
        esc(describeRank(r.job, ring[i]) + (suspect ? ": suspect" : "")));
    if (node < 12 && (bad || i % 4 == 0)) {
      // Small nodes: the rank number goes outside the ring, for every fourth node and the culprit.
      double a = -M_PI / 2 + 2 * M_PI * static_cast<double>(i) / static_cast<double>(ring.size());
      fmt::format_to(o,
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"11\" fill=\"#222\">{}</text>\n",
          cx + (radius + 24) * std::cos(a), cy + (radius + 24) * std::sin(a) + 4, ring[i]);
    }
    if (node >= 12) {
      fmt::format_to(o,
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"13\" fill=\"{}\" "
          "font-weight=\"bold\">{}</text>\n",
          x, y + 4.5, !bad && fillOf(r, ring[i]) == kMissingColour ? "#222" : "#fff", ring[i]);
    }
  }
  fmt::format_to(o, "</svg>\n");
  if (r.nodes.size() >= 2)
    fmt::format_to(o,
                   "<p class=\"legend\" style=\"max-width:520px;font-size:13px\">Shaded arcs are nodes; dashed blue "
                   "arrows bowing outward are network links between nodes, straight arrows links inside a node.</p>\n");
}

void gridSvg(Out o, const Report& r) {
  int n = std::min(r.job.world_size, kHtmlGridMaxRanks);
  if (n <= 0) return;
  int cell = n > 1024 ? 6 : 18;
  int cols = n > 1024 ? 128 : std::min(n, kHtmlGridColumns);
  int rows = (n + cols - 1) / cols;
  int w = cols * cell + 60, h = rows * cell + 10;
  fmt::format_to(o, "<h2>Ranks by stack class</h2>\n<svg id=\"grid\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\">\n",
                 w, h);
  for (int row = 0; row < rows; ++row)
    fmt::format_to(o, "<text x=\"0\" y=\"{}\" font-size=\"{}\">{}</text>\n", row * cell + cell - 4, std::min(cell, 11), row * cols);
  for (int k = 0; k < n; ++k) {
    int x = 50 + (k % cols) * cell, y = (k / cols) * cell;
    bool bad = std::find(r.verdict.culprit_ranks.begin(), r.verdict.culprit_ranks.end(), k) != r.verdict.culprit_ranks.end();
    int c = r.rank_class[k];
    fmt::format_to(o, "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"", x + 1, y + 1, cell - 2, cell - 2,
                   fillOf(r, k));
    if (bad) fmt::format_to(o, " stroke=\"{}\" stroke-width=\"3\"", HtmlReportWriter::kCulpritColour);
    fmt::format_to(o, "><title>{}: {}{}</title></rect>\n", esc(describeRank(r.job, k)),
                   c < 0 ? std::string("no stacks") : std::string("class ") + TextReportWriter::classLetter(c),
                   bad ? ", culprit" : "");
  }
  fmt::format_to(o, "</svg>\n");
}

}  // namespace

std::string HtmlReportWriter::classColour(int index) {
  static const char* palette[] = {"#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf",
                                  "#8c564b", "#bcbd22", "#e377c2", "#7f7f7f", "#393b79"};
  constexpr int n = sizeof palette / sizeof palette[0];
  if (index >= 0 && index < n) return palette[index];
  // Past the palette: hues away from red (60..300 degrees).
  return fmt::format("hsl({},55%,45%)", 60 + (index * 47) % 240);
}

namespace {

void writeHead(Out o, const Report& r) {
  const Verdict& v = r.verdict;
  fmt::format_to(o,
                 "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>hangwatch report: {}</title>\n"
                 "<style>body{{font-family:sans-serif;margin:24px;color:#222;background:#fff}}"
                 ".verdict{{font-size:20px;font-weight:bold;padding:12px;border-left:8px solid #444;background:#f4f4f4}}"
                 ".kind{{text-transform:uppercase;letter-spacing:1px}}li{{margin:4px 0}}code,pre{{font-size:13px}}"
                 "table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left;"
                 "vertical-align:top}}"
                 ".swatch{{display:inline-block;width:14px;height:14px;border:1px solid #333;vertical-align:middle}}"
                 ".pics{{display:flex;flex-wrap:wrap;gap:32px}}"
                 ".gap{{font-size:20px;font-weight:bold;padding:12px;border-left:8px solid #b8860b;background:#fff5d6;"
                 "margin-top:8px}}.gap ul{{font-size:15px;font-weight:normal}}</style></head><body>\n",
                 esc(r.job.job_id));
  fmt::format_to(o, "<h1>hangwatch report: job {}</h1>\n", esc(r.job.job_id));
  if (r.job.attempt.count > 1) fmt::format_to(o, "<p id=\"attempt\">{}</p>\n", esc(attemptText(r.job.attempt)));
  if (r.job.stage == Stage::kSuspected) {
    fmt::format_to(o, "<div class=\"gap\" id=\"stage\">Stage: suspected");
    for (const std::string& line : suspectSentences(r.job)) fmt::format_to(o, "<p>{}</p>", esc(line));
    fmt::format_to(o, "</div>\n");
  } else {
    fmt::format_to(o, "<p id=\"stage\">Stage: {}</p>\n", stageName(r.job.stage));
  }
  fmt::format_to(o, "<div class=\"verdict\"><span class=\"kind\">{}</span><br>{}", esc(verdictKindName(v.kind)),
                 esc(v.headline));
  for (const RankPlaceInJob& p : v.places)
    fmt::format_to(o, "<br><span class=\"place\">rank {}: pipeline stage {} of {} (ranks {})</span>", p.rank, p.stage,
                   p.stages, esc(wording::ranksText(p.stage_ranks)));
  fmt::format_to(o, "</div>\n");
}

// As prominent as the verdict: what it hinges on, who is still possible, and which ranks lack data.
void writeDataGap(Out o, const Report& r) {
  const Verdict& v = r.verdict;
  if (v.confident && r.job.ranks_collecting.empty()) return;
  fmt::format_to(o, "<div class=\"gap\" id=\"data-gap\">");
  if (!v.confident) {
    fmt::format_to(o, "Not confident: the verdict hinges on {}<ul>",
                   esc(v.hinges_on.empty() ? "data that is missing" : v.hinges_on));
    if (!v.suspects.empty()) {
      fmt::format_to(o, "<li>Suspects: ");
      for (size_t i = 0; i < v.suspects.size(); ++i) {
        const std::string hosts = hostsText(v.suspects[i]);
        fmt::format_to(o, "{}{}{}", i ? "; " : "", esc(v.suspects[i].text), hosts.empty() ? "" : " [" + esc(hosts) + "]");
      }
      fmt::format_to(o, "</li>");
    }
    for (const DataGap& g : v.lacking_data) fmt::format_to(o, "<li>rank {} lacks data: {}</li>", g.rank, esc(g.lacks));
    fmt::format_to(o, "</ul>");
  }
  if (!r.job.ranks_collecting.empty()) {
    stackmerge::RankSet collecting;
    for (int c : r.job.ranks_collecting) collecting.insert(c);
    fmt::format_to(o,
                   "<p>Still collecting: rank(s) {} had not finished dumping when this report was made; run it "
                   "again.</p>",
                   esc(collecting.toString()));
  }
  fmt::format_to(o, "</div>\n");
}

void writeEvidence(Out o, const Verdict& v) {
  fmt::format_to(o, "<h2>Evidence</h2><ul>");
  for (const std::string& e : v.evidence) fmt::format_to(o, "<li>{}</li>", esc(e));
  fmt::format_to(o, "</ul>\n");
  for (const CulpritStack& c : v.where) {
    fmt::format_to(o, "<h3>Where rank {} is (thread {})</h3><pre>", c.rank, esc(c.thread));
    for (const std::string& f : c.frames) fmt::format_to(o, "{}\n", esc(f));
    fmt::format_to(o, "</pre>\n");
  }
}

void writeNodeList(Out o, const Report& r);

void writeData(Out o, const Report& r) {
  fmt::format_to(o, "<h2>Data</h2><p>{} of {} {}rank(s) answered.{}</p><ul>", r.job.ranks.size(), r.job.world_size,
                 r.job.gpu_ranks.empty() ? "" : "GPU ", r.job.gpu_ranks.empty() ? "" : " " + esc(gpuRanksText(r.job)));
  if (!r.job.ranks_missing.empty()) {
    stackmerge::RankSet missing;
    for (int m : r.job.ranks_missing) missing.insert(m);
    fmt::format_to(o, "<li>Ranks missing (no usable dump): {}</li>", missing.toString());
  }
  for (const PartialRank& p : r.job.ranks_partial)
    fmt::format_to(o, "<li>rank {}: {} missing: {}</li>", p.rank, esc(p.missing), esc(p.reason));
  for (const std::string& p : r.job.problems) fmt::format_to(o, "<li>{}</li>", esc(p));
  fmt::format_to(o, "</ul>\n");
  writeNodeList(o, r);
}

// The nodes, each with the verdict's part in it; at thousands of nodes, those it involves and a few.
void writeNodeList(Out o, const Report& r) {
  if (r.nodes.size() < 2) return;
  constexpr size_t kShown = 16;
  fmt::format_to(o, "<h3>Nodes ({}; links between them are network links)</h3><ul id=\"nodes\">", r.nodes.size());
  size_t shown = 0;
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    const std::string role = nodeRole(r.verdict, r.nodes[i].ranks);
    if (role.empty() && i >= kShown) continue;
    ++shown;
    fmt::format_to(o, "<li><b>{}</b>: ranks {}{}</li>", esc(r.nodes[i].host), esc(r.nodes[i].ranks.toString()),
                   role.empty() ? "" : " &mdash; " + esc(role));
  }
  if (shown < r.nodes.size()) fmt::format_to(o, "<li>... {} more node(s)</li>", r.nodes.size() - shown);
  fmt::format_to(o, "</ul>\n");
}

void writeStackClassTable(Out o, const Report& r) {
  if (r.stack_classes.empty()) return;
  fmt::format_to(o, "<h2>Stack classes</h2><table><tr><th>class</th><th>ranks</th><th>threads (innermost frame first)</th></tr>\n");
  for (size_t i = 0; i < r.stack_classes.size() && i < 52; ++i) {
    const stackmerge::StackClass& c = r.stack_classes[i];
    fmt::format_to(o, "<tr><td><span class=\"swatch\" style=\"background:{}\"></span> {}</td><td>{} ({})</td><td>",
                   HtmlReportWriter::classColour(static_cast<int>(i)), TextReportWriter::classLetter(static_cast<int>(i)),
                   esc(c.ranks.toString()), c.ranks.size());
    for (size_t t = 0; t < c.thread_stacks.size(); ++t) {
      fmt::format_to(o, "<b>{}</b>: ", esc(t < c.thread_names.size() ? c.thread_names[t] : "?"));
      for (size_t k = 0; k < c.thread_stacks[t].size() && k < 8; ++k)
        fmt::format_to(o, "{}{}", k ? " &larr; " : "", esc(c.thread_stacks[t][k]));
      fmt::format_to(o, "<br>");
    }
    fmt::format_to(o, "</td></tr>\n");
  }
  fmt::format_to(o, "</table>\n");
}

}  // namespace

std::string HtmlReportWriter::write(const Report& r) {
  const Verdict& v = r.verdict;
  std::string html;
  Out o(html);
  writeHead(o, r);
  writeDataGap(o, r);
  if (!v.next_steps.empty()) {
    fmt::format_to(o, "<h2>What to do next</h2><ul>");
    for (const std::string& s : v.next_steps) fmt::format_to(o, "<li>{}</li>", esc(s));
    fmt::format_to(o, "</ul>\n");
  }
  fmt::format_to(o, "<div class=\"pics\"><div>");
  ringSvg(o, r);
  fmt::format_to(o, "</div><div>");
  gridSvg(o, r);
  fmt::format_to(o, "</div></div>\n");
  writeEvidence(o, v);
  writeData(o, r);
  writeStackClassTable(o, r);
  fmt::format_to(o, "</body></html>\n");
  return html;
}

}  // namespace hangwatch::verdict
