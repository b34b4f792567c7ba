// The exporter's answers (metrics/http_response.h): GET /metrics gets the
// text format, HEAD the same head without the body, other paths 404, other
// methods 405 with Allow, and each parse error its status and a close.
#include "metrics/http_response.h"

#include <gtest/gtest.h>

#include <string>

#include "metrics/text_format.h"

namespace ps::metrics {
namespace {

const std::string kBody = "# TYPE up gauge\nup 1\n";

HttpResponse Answer(const std::string& head) {
  return Respond(ParseRequestHead(head), [] { return kBody; });
}

bool Has(const HttpResponse& r, const std::string& text) {
  return r.bytes.find(text) != std::string::npos;
}

TEST(HttpResponse, MetricsWithGetAndHead) {
  HttpResponse get = Answer("GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(get.status, HttpStatus::kOk);
  EXPECT_FALSE(get.close);
  EXPECT_EQ(get.bytes.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << get.bytes;
  EXPECT_TRUE(Has(get, std::string("Content-Type: ") + kTextContentType));
  EXPECT_TRUE(Has(get, "Content-Length: " + std::to_string(kBody.size())));
  EXPECT_FALSE(Has(get, "Connection: close"));
  EXPECT_EQ(get.bytes.substr(get.bytes.size() - kBody.size()), kBody);

  HttpResponse head = Answer("HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.status, HttpStatus::kOk);
  EXPECT_TRUE(Has(head, "Content-Length: " + std::to_string(kBody.size())));
  EXPECT_EQ(head.bytes.substr(head.bytes.size() - 4), "\r\n\r\n");
  EXPECT_EQ(head.bytes.size(), get.bytes.size() - kBody.size());

  HttpResponse close = Answer("GET /metrics HTTP/1.0\r\n\r\n");
  EXPECT_TRUE(close.close);
  EXPECT_TRUE(Has(close, "Connection: close\r\n"));
}

TEST(HttpResponse, OtherPathsAndMethods) {
  HttpResponse r = Answer("GET /other HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.status, HttpStatus::kNotFound);
  EXPECT_FALSE(r.close);  // a well-formed request: the connection stays
  r = Answer("POST /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.status, HttpStatus::kMethodNotAllowed);
  EXPECT_TRUE(Has(r, "\r\nAllow: GET, HEAD\r\n"));
}

TEST(HttpResponse, ParseErrorsCloseTheConnection) {
  HttpResponse r = Answer("nonsense\r\n");
  EXPECT_EQ(r.status, HttpStatus::kBadRequest);
  EXPECT_TRUE(r.close);
  EXPECT_TRUE(Has(r, "Connection: close\r\n"));
  r = Answer("GET /metrics HTTP/1.1\r\nX: " +
             std::string(kMaxRequestHeadBytes, 'a'));
  EXPECT_EQ(r.status, HttpStatus::kHeadTooLarge);
  EXPECT_TRUE(r.close);
  EXPECT_EQ(r.bytes.rfind("HTTP/1.1 431 ", 0), 0u);
  r = Answer("GET /metrics HTTP/3.0\r\n\r\n");
  EXPECT_EQ(r.status, HttpStatus::kVersionNotSupported);
  EXPECT_TRUE(r.close);
}

}  // namespace
}  // namespace ps::metrics
