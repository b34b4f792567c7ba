// The exporter's request parser (metrics/http_request.h) on what peers may
// send: every way a head can be malformed gets its error (400, 431 or 505)
// and never a request; a head that is merely incomplete waits for more;
// well-formed heads give the method, the path and whether to keep the
// connection, and how many bytes they took (what follows is the next
// request).
#include "metrics/http_request.h"

#include <gtest/gtest.h>

#include <string>

namespace ps::metrics {
namespace {

ParseOutcome OutcomeOf(const std::string& head) {
  return ParseRequestHead(head).outcome;
}

TEST(HttpRequest, ParsesAScrape) {
  const std::string head =
      "GET /metrics?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9100\r\n"
      "User-Agent: Prometheus/2.42.0\r\nAccept: text/plain;version=0.0.4\r\n"
      "Content-Length: 0\r\n\r\n";
  const ParsedHead p = ParseRequestHead(head + "GET /next");
  ASSERT_EQ(p.outcome, ParseOutcome::kComplete) << p.error;
  EXPECT_EQ(p.request.method, HttpMethod::kGet);
  EXPECT_EQ(p.request.path, "/metrics");
  EXPECT_TRUE(p.request.keep_alive);
  EXPECT_EQ(p.request.head_bytes, head.size());
}

TEST(HttpRequest, ConnectionAndVersions) {
  ParsedHead p = ParseRequestHead(
      "HEAD /metrics HTTP/1.1\r\nConnection: Keep-Alive, "
      "CLOSE\r\n\r\n");
  ASSERT_EQ(p.outcome, ParseOutcome::kComplete) << p.error;
  EXPECT_EQ(p.request.method, HttpMethod::kHead);
  EXPECT_FALSE(p.request.keep_alive);
  // HTTP/1.0 closes, whatever it asks for.
  p = ParseRequestHead(
      "GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  ASSERT_EQ(p.outcome, ParseOutcome::kComplete) << p.error;
  EXPECT_FALSE(p.request.keep_alive);
  // Bare LF ends lines too (some clients, and people typing).
  p = ParseRequestHead("GET /metrics HTTP/1.1\nHost: x\n\n");
  ASSERT_EQ(p.outcome, ParseOutcome::kComplete) << p.error;
  EXPECT_EQ(p.request.head_bytes, 31u);
  // A method not served is well-formed: 405, not 400.
  p = ParseRequestHead("DELETE /metrics HTTP/1.1\r\n\r\n");
  ASSERT_EQ(p.outcome, ParseOutcome::kComplete) << p.error;
  EXPECT_EQ(p.request.method, HttpMethod::kOther);
  // Methods are case-sensitive.
  p = ParseRequestHead("get /metrics HTTP/1.1\r\n\r\n");
  ASSERT_EQ(p.outcome, ParseOutcome::kComplete) << p.error;
  EXPECT_EQ(p.request.method, HttpMethod::kOther);
}

TEST(HttpRequest, IncompleteWaitsForMore) {
  const std::string head = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  for (size_t n = 0; n < head.size(); ++n) {
    EXPECT_EQ(OutcomeOf(head.substr(0, n)), ParseOutcome::kIncomplete)
        << "after " << n << " bytes";
  }
  EXPECT_EQ(OutcomeOf(head), ParseOutcome::kComplete);
}

TEST(HttpRequest, MalformedRequestLines) {
  for (const char* line : {
           "\r\n",                         // empty
           "GET\r\n",                      // no target
           "GET /metrics\r\n",             // no version (HTTP/0.9)
           "GET  /metrics HTTP/1.1\r\n",   // two spaces
           "GET /metrics HTTP/1.1 \r\n",   // trailing space
           "GET /metrics HTTP/1.1 x\r\n",  // four parts
           "G(T /metrics HTTP/1.1\r\n",    // not a token
           "GET metrics HTTP/1.1\r\n",     // not a path
           "GET http://h/metrics HTTP/1.1\r\n",
           "GET /met\x7frics HTTP/1.1\r\n",  // DEL in the target
           "GET /metrics http/1.1\r\n",      // lower-case
           "GET /metrics HTTP/1.10\r\n",
           "GET /metrics HTTP/x.1\r\n",
       }) {
    const ParsedHead p = ParseRequestHead(line);
    EXPECT_EQ(p.outcome, ParseOutcome::kBadRequest) << line;
    EXPECT_FALSE(p.error.empty()) << line;
  }
  // Refused as soon as the first line is whole, not after the head.
  EXPECT_EQ(OutcomeOf("garbage\r\nHost: x\r\n"), ParseOutcome::kBadRequest);
}

TEST(HttpRequest, OtherMajorVersionsAreNotSupported) {
  EXPECT_EQ(OutcomeOf("GET /metrics HTTP/2.0\r\n\r\n"),
            ParseOutcome::kVersionNotSupported);
  EXPECT_EQ(OutcomeOf("GET /metrics HTTP/0.9\r\n\r\n"),
            ParseOutcome::kVersionNotSupported);
}

TEST(HttpRequest, MalformedFields) {
  for (const char* head : {
           "GET /metrics HTTP/1.1\r\nHost x\r\n\r\n",    // no colon
           "GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n",  // space before :
           "GET /metrics HTTP/1.1\r\n: x\r\n\r\n",       // no name
           "GET /metrics HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",  // obs-fold
           "GET /metrics HTTP/1.1\r\nA: b\001c\r\n\r\n",        // control char
           "GET /metrics HTTP/1.1\r\nA: b\rc\r\n\r\n",          // bare CR
           "GET /metrics HTTP/1.1\r\nA: b\r\n\r\n",  // fine (control)
       }) {
    const std::string h = head;
    const ParseOutcome want = h.find("A: b\r\n\r\n") != std::string::npos
                                  ? ParseOutcome::kComplete
                                  : ParseOutcome::kBadRequest;
    EXPECT_EQ(OutcomeOf(h), want) << h;
  }
  const char raw[] = "GET /metrics HTTP/1.1\r\nA: \0\r\n\r\n";
  const std::string nul(raw, sizeof(raw) - 1);
  EXPECT_EQ(OutcomeOf(nul), ParseOutcome::kBadRequest);
  // A bare CR is refused before the head is whole.
  EXPECT_EQ(OutcomeOf("GET /metrics HTTP/1.1\r\nA: b\rc"),
            ParseOutcome::kBadRequest);
}

TEST(HttpRequest, BodiesAreRefused) {
  EXPECT_EQ(OutcomeOf("GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\n"),
            ParseOutcome::kBadRequest);
  EXPECT_EQ(OutcomeOf("GET /metrics HTTP/1.1\r\ncontent-length: x\r\n\r\n"),
            ParseOutcome::kBadRequest);
  EXPECT_EQ(OutcomeOf("GET /metrics HTTP/1.1\r\nContent-Length:\r\n\r\n"),
            ParseOutcome::kBadRequest);
  EXPECT_EQ(OutcomeOf("GET /metrics HTTP/1.1\r\nTransfer-Encoding: "
                      "chunked\r\n\r\n"),
            ParseOutcome::kBadRequest);
  EXPECT_EQ(OutcomeOf("GET /metrics HTTP/1.1\r\nContent-Length: 00\r\n\r\n"),
            ParseOutcome::kComplete);
}

TEST(HttpRequest, HeadsOverTheLimitAreTooLarge) {
  const std::string line = "GET /metrics HTTP/1.1\r\n";
  // No end within the limit: refused without waiting for more.
  std::string trickle = line + "X: " + std::string(kMaxRequestHeadBytes, 'a');
  EXPECT_EQ(OutcomeOf(trickle.substr(0, kMaxRequestHeadBytes - 1)),
            ParseOutcome::kIncomplete);
  EXPECT_EQ(OutcomeOf(trickle.substr(0, kMaxRequestHeadBytes)),
            ParseOutcome::kHeadTooLarge);
  // A whole head one byte over.
  std::string whole = line + "X: ";
  whole += std::string(kMaxRequestHeadBytes - whole.size() - 4 + 1, 'a');
  whole += "\r\n\r\n";
  ASSERT_EQ(whole.size(), kMaxRequestHeadBytes + 1);
  EXPECT_EQ(OutcomeOf(whole), ParseOutcome::kHeadTooLarge);
  whole.erase(line.size() + 3, 1);
  EXPECT_EQ(OutcomeOf(whole), ParseOutcome::kComplete);
  // A first line that never ends.
  EXPECT_EQ(OutcomeOf(std::string(kMaxRequestHeadBytes, 'a')),
            ParseOutcome::kHeadTooLarge);
  EXPECT_EQ(OutcomeOf("GET /" + std::string(kMaxRequestHeadBytes, 'm')),
            ParseOutcome::kHeadTooLarge);
}

TEST(HttpRequest, FindHeadEndLooksOnlyAtNewBytes) {
  const std::string head = "GET / HTTP/1.1\r\nA: b\r\n\r\nrest";
  EXPECT_EQ(FindHeadEnd(head, 0), head.size() - 4);
  // The LF that ends the head looks back at bytes scanned before.
  EXPECT_EQ(FindHeadEnd(head, head.size() - 5), head.size() - 4);
  EXPECT_EQ(FindHeadEnd(head, head.size() - 3), std::string::npos);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\n", 0), std::string::npos);
  EXPECT_EQ(FindHeadEnd("\r\n", 0), 2u);  // an empty first line
  EXPECT_EQ(FindHeadEnd("a\n\n", 2), 3u);
}

}  // namespace
}  // namespace ps::metrics
