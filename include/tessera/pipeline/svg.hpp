// tessera/pipeline/svg.hpp: a schedule's simulated timeline as an SVG picture.
//
// One row per rank, one box per compute action at its simulated start and length,
// coloured by kind (F blue, B green, I teal, W purple) and labelled `{stage}{kind}{mb}`
// when the box is wide enough; idle time stays white. Run time only.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <tessera/pipeline/schedule.hpp>
#include <tessera/pipeline/simulate.hpp>

namespace tessera::pipeline {

inline std::string to_svg(const schedule& s, const simulation& sim, std::string_view title = {}) {
  const double unit = sim.makespan > 0 ? std::min(60.0, 1400.0 / sim.makespan) : 10.0;  // pixels per time unit
  const int row = 28, left = 64, top = title.empty() ? 8 : 30;
  const double width = left + sim.makespan * unit + 16;
  const double height = top + row * s.ranks + 24;
  char buf[512];
  std::string out;
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                "font-family=\"monospace\" font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                width, height);
  out += buf;
  if (!title.empty()) {
    out += "<text x=\"8\" y=\"18\" font-size=\"13\">";
    for (char c : title) out += c == '<' ? std::string("&lt;") : c == '&' ? std::string("&amp;") : std::string(1, c);
    out += "</text>\n";
  }
  for (int r = 0; r < s.ranks; ++r) {
    const int y = top + r * row;
    std::snprintf(buf, sizeof buf, "<text x=\"4\" y=\"%d\">rank %d</text>\n", y + 18, r);
    out += buf;
    const auto& list = s.actions[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < list.size(); ++i) {
      const action a = list[i];
      if (!is_compute(a.kind)) continue;
      const double x0 = left + sim.start[static_cast<std::size_t>(r)][i] * unit;
      const double w = (sim.finish[static_cast<std::size_t>(r)][i] - sim.start[static_cast<std::size_t>(r)][i]) * unit;
      const char* fill = a.kind == op::F ? "#8ab4f8" : a.kind == op::B ? "#81c995" : a.kind == op::I ? "#7fd3c7" : "#c58af9";
      std::snprintf(buf, sizeof buf,
                    "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\" stroke=\"#333\" "
                    "stroke-width=\"0.5\"><title>%s</title></rect>\n",
                    x0, y + 4, w, row - 8, fill, format(a).text);
      out += buf;
      if (w >= 7.0 * format(a).size) {
        std::snprintf(buf, sizeof buf, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", x0 + w / 2, y + 18,
                      format(a).text);
        out += buf;
      }
    }
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"%d\" y=\"%.0f\">makespan %.3g, bubble %.1f%%</text>\n</svg>\n", left,
                height - 6, sim.makespan, 100 * sim.bubble);
  out += buf;
  return out;
}

}  // namespace tessera::pipeline
