// Reader of the PyTorch schedule dumps in tests/pipeline/data (see dump_pytorch_schedules.py).
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <tessera/pipeline/schedule.hpp>
#include <vector>

namespace tessera_test {

struct pytorch_case {
  int p = 0, v = 0, m = 0;
  bool raises = false;
  std::string reason;              ///< PyTorch's exception text when it raises
  std::vector<std::string> rows;   ///< one CSV row per rank
};

inline std::vector<pytorch_case> read_pytorch_cases(const std::string& path) {
  std::ifstream in(path);
  std::vector<pytorch_case> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("#case ", 0) == 0 || line.rfind("#raises ", 0) == 0) {
      pytorch_case c;
      c.raises = line[1] == 'r';
      std::istringstream is(line.substr(c.raises ? 8 : 6));
      is >> c.p >> c.v >> c.m;
      if (c.raises) std::getline(is, c.reason);
      else
        for (int r = 0; r < c.p && std::getline(in, line); ++r) c.rows.push_back(line);
      out.push_back(std::move(c));
    }
  }
  return out;
}

inline tessera::pipeline::table_result to_schedule(const pytorch_case& c) {
  std::vector<std::string_view> views(c.rows.begin(), c.rows.end());
  return tessera::pipeline::from_table(views);
}

}  // namespace tessera_test
