// Issue 22's findings 1-7 and issue 18's stray '}': the JSON reader, flight dumps and layout
// strings on the minimal inputs that once crashed, hung or were misread.
#include <doctest/doctest.h>

#include <string>
#include <tessera/comm/flight_analyzer.hpp>
#include <tessera/core/json.hpp>
#include <tessera/layout/parse.hpp>

namespace json = tessera::json;
using tessera::error;

namespace {
std::string parse_error(std::string_view text) {
  try {
    (void)json::parse(text, "f.json");
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("json: numbers out of double range are errors, not std::out_of_range (finding 1)") {
  CHECK(parse_error("2e666") == "f.json: invalid JSON at byte 5: number 2e666 is out of the range of a double");
  CHECK(parse_error("[1e-400]").find("f.json: invalid JSON at byte 7: number 1e-400 is out of the range") == 0);
  CHECK(parse_error("-2e666").find("out of the range of a double") != std::string::npos);
  const json::value big = json::parse("[9223372036854775807, 9223372036854775808, -9223372036854775808, 1.0, 1e3]", "f");
  CHECK(big.items[0].as_int64() == INT64_MAX);
  CHECK(!big.items[1].as_int64());  // a double, but no int64
  CHECK(big.items[1].num == 9223372036854775808.0);
  CHECK(big.items[2].as_int64() == INT64_MIN);
  CHECK(!big.items[3].as_int64());
  CHECK(!big.items[4].as_int64());
}

TEST_CASE("json: \\u escapes need four hex digits (finding 2)") {
  CHECK(parse_error("\"\\utule\"") == "f.json: invalid JSON at byte 3: a \\u escape needs four hex digits, got 't'");
  CHECK(parse_error("\"\\u -1a\"").find("a \\u escape needs four hex digits, got ' '") != std::string::npos);
  CHECK(parse_error("\"\\u12\"").find("four hex digits") != std::string::npos);
  CHECK(parse_error("\"\\ud800\"").find("not followed by a low one") != std::string::npos);
  CHECK(parse_error("\"\\udc00\"").find("lone low surrogate") != std::string::npos);
  CHECK(json::parse("\"\\u00e9\\ud83d\\ude00\\/\"", "f").str == "\xc3\xa9\xf0\x9f\x98\x80/");
}

TEST_CASE("json: nesting is limited, 100,000 '[' are an error, not a stack overflow (finding 3)") {
  CHECK(parse_error(std::string(100000, '[')) == "f.json: invalid JSON at byte 64: nesting deeper than 64 levels");
  CHECK(parse_error(std::string(64, '[') + std::string(64, ']')) == "(no error)");
  CHECK_THROWS_WITH_AS(json::parse("[[[]]]", "g", 2), "g: invalid JSON at byte 2: nesting deeper than 2 levels", tessera::error);
}

TEST_CASE("json: strict grammar, trailing bytes rejected (issue 18's stray '}')") {
  CHECK(parse_error("{\"a\":1}}") == "f.json: invalid JSON at byte 7: unexpected text after the JSON value");
  CHECK(parse_error("{\"a\":1,\"a\":2}").find("duplicate key \"a\"") != std::string::npos);
  CHECK(parse_error("01").find("leading zero") != std::string::npos);
  CHECK(parse_error("[1,]").find("unexpected ']'") != std::string::npos);
  CHECK(parse_error("\"a\nb\"").find("control character byte 0x0a in a string") != std::string::npos);
  CHECK(parse_error("").find("unexpected end of input") != std::string::npos);
  CHECK(parse_error("nul").find("unexpected 'n'") != std::string::npos);
  CHECK(parse_error("\"\\x\"").find("unknown escape \\x") != std::string::npos);
}

TEST_CASE("json: quote and parse are each other's reverse on any bytes") {
  std::string all;
  for (int c = 1; c < 256; ++c) all.push_back(static_cast<char>(c));
  all.push_back('\0');
  CHECK(json::parse(json::quote(all), "f").str == all);
}

// ---- flight-recorder dumps ----

namespace {
std::string dump_with(const std::string& rank, const std::string& entries) {
  return "{\"version\":1,\"rank\":" + rank + ",\"world_size\":2,\"backend\":\"threads\",\"capacity\":8,"
         "\"recorded\":2,\"entries\":[" + entries + "]}";
}
std::string entry(int seq, const std::string& kind = "all_reduce", const std::string& extra = "") {
  return "{\"id\":" + std::to_string(seq) + ",\"group\":[0,1],\"seq\":" + std::to_string(seq) +
         ",\"kind\":\"" + kind + "\",\"count\":4,\"dtype\":\"f32\",\"op\":\"sum\",\"peer\":-1,\"tag\":0,"
         "\"state\":\"completed\",\"error\":\"\",\"enqueue_us\":" + std::to_string(seq) +
         ",\"start_us\":0,\"end_us\":1,\"file\":\"t.cpp\",\"line\":7,\"function\":\"f\"" + extra + "}";
}
}  // namespace

TEST_CASE("flight dump: integers out of range are errors, not undefined behaviour (finding 4)") {
  using tessera::comm::parse_flight_dump;
  CHECK_THROWS_WITH_AS(parse_flight_dump(dump_with("1e300", ""), "r0.json"),
                       "r0.json: field \"rank\" is not an integer, expected an integer in [0, 2147483647]; "
                       "is this a tessera flight-recorder dump?", tessera::error);
  CHECK_THROWS_WITH_AS(parse_flight_dump(dump_with("-1", ""), "r0.json"),
                       doctest::Contains("field \"rank\" is -1, expected an integer in [0,"), tessera::error);
  CHECK_THROWS_WITH_AS(parse_flight_dump(dump_with("0", "{\"kind\":\"barrier\",\"group\":[0],\"seq\":-1}"), "r0.json"),
                       doctest::Contains("r0.json: field \"seq\" of entry 0 is -1"), tessera::error);
  CHECK_THROWS_WITH_AS(parse_flight_dump(dump_with("0", "{\"kind\":\"barrier\",\"group\":[1e9]}"), "r0.json"),
                       doctest::Contains("field \"group\" of entry 0 is not an integer"), tessera::error);
  CHECK_THROWS_WITH_AS(parse_flight_dump(dump_with("0", "{\"kind\":7,\"group\":[0]}"), "r0.json"),
                       doctest::Contains("field \"kind\" of entry 0 is a number, expected a string"), tessera::error);
  CHECK_THROWS_WITH_AS(parse_flight_dump("[]", "r0.json"),
                       "r0.json: a flight-recorder dump is a JSON object, this is an array", tessera::error);
  CHECK_THROWS_WITH_AS(parse_flight_dump(std::string(100000, '['), "r0.json"),
                       doctest::Contains("r0.json: invalid JSON at byte 64: nesting deeper"), tessera::error);
}

TEST_CASE("flight analyzer: a gap in sequence numbers is reported, not a crash (finding 5)") {
  using namespace tessera::comm;
  // rank 0 has collectives #0 and #2, rank 1 #0 and #2: nobody has #1.
  const auto a = parse_flight_dump(dump_with("0", entry(0) + "," + entry(2)), "r0.json");
  const auto b = parse_flight_dump(dump_with("1", entry(0) + "," + entry(2)), "r1.json");
  CHECK(analyze_flight({a, b}).ok());
  // rank 1 lacks #2 that rank 0 has, with a gap before it
  const auto c = parse_flight_dump(dump_with("1", entry(0)), "r1.json");
  const auto rep = analyze_flight({a, c});
  REQUIRE(rep.problems.size() == 1);
  CHECK(rep.problems[0].find("rank(s) 1 did not join collective #2 of group [0,1]") == 0);
}

TEST_CASE("flight analyzer: far-apart sequence numbers do not hang it (finding 6)") {
  using namespace tessera::comm;
  const auto a = parse_flight_dump(dump_with("0", entry(0) + "," + entry(1) + ",\n" +
                                                      "{\"kind\":\"all_reduce\",\"group\":[0,1],\"seq\":9007199254740992}"),
                                   "r0.json");
  const auto b = parse_flight_dump(dump_with("1", entry(0) + "," + entry(1)), "r1.json");
  const auto rep = analyze_flight({a, b});
  REQUIRE(rep.problems.size() == 1);
  CHECK(rep.problems[0].find("rank(s) 1 did not join collective #9007199254740992") == 0);
  const std::string seq_2_53_1 = dump_with("0", "{\"kind\":\"barrier\",\"group\":[0],\"seq\":9007199254740993}");
  CHECK_THROWS_WITH_AS(parse_flight_dump(seq_2_53_1, "r0.json"),
                       doctest::Contains("field \"seq\" of entry 0 is 9007199254740993, expected an integer in [0, 9007199254740992]"),
                       tessera::error);
  // point to point: a send at #0 and one at #2^53 pair with recvs at the same numbers
  const std::string s0 = entry(0, "send", "").replace(entry(0, "send").find("\"peer\":-1"), 9, "\"peer\":1");
  const std::string r0 = entry(0, "recv", "").replace(entry(0, "recv").find("\"peer\":-1"), 9, "\"peer\":0");
  const auto p = parse_flight_dump(dump_with("0", s0), "p0.json");
  const auto q = parse_flight_dump(dump_with("1", r0), "p1.json");
  CHECK(analyze_flight({p, q}).ok());
}

TEST_CASE("flight dump: to_json and parse_flight_dump are each other's reverse") {
  using namespace tessera::comm;
  const auto a = parse_flight_dump(dump_with("0", entry(0) + "," + entry(1, "broadcast", "")), "r0.json");
  const auto b = parse_flight_dump(to_json(a), "again.json");
  REQUIRE(b.entries.size() == 2);
  CHECK(b.rank == a.rank);
  CHECK(b.world_size == a.world_size);
  CHECK(b.entries[1].desc == a.entries[1].desc);
  CHECK(b.entries[1].file == "t.cpp");
  CHECK(to_json(b) == to_json(a));
}

// ---- layout strings ----

TEST_CASE("layout strings: numbers too large for int are errors, not overflow (finding 7)") {
  const std::string_view names[] = {"dp", "tp"};
  CHECK_THROWS_WITH_AS(tessera::parse_layout("S(99999999999),R", names, 2),
                       "layout 'S(99999999999),R': the number '99999999999' is too large", tessera::error);
  CHECK_THROWS_WITH_AS(tessera::parse_layout("S(-4294967296),R", names, 2), doctest::Contains("is too large"), tessera::error);
  CHECK_THROWS_WITH_AS(tessera::parse_layout("{4294967296: dp}", names, 2), doctest::Contains("is too large"), tessera::error);
  CHECK_THROWS_WITH_AS(tessera::parse_layout("S(0)#4294967296,R", names, 2), doctest::Contains("is too large"), tessera::error);
  CHECK_THROWS_WITH_AS(tessera::parse_layout("S(99999),R", names, 2), doctest::Contains("out of range"), tessera::error);
}

TEST_CASE("json: dump and parse are each other's reverse") {
  const char* docs[] = {R"({"a":[1,-2,3.5,1e300,-0.0,12345678901234567890,true,false,null],"b":{"c":"\u00e9\n"}})",
                        "[]", "{}", "\"\"", "5e-324", "[1.0,100000000000000000000]"};
  for (const char* d : docs) {
    const json::value v = json::parse(d, "f");
    CHECK(json::parse(json::dump(v), "again") == v);
  }
  CHECK(json::dump(json::parse("[1.0, 2, \"x\"]", "f")) == "[1.0,2,\"x\"]");
}
