// Printable: text a peer sent (a name in a hello, a path in a request), made
// safe to put in a log line before anything vouches for the peer. Control
// characters, bytes outside printable ASCII, backslashes and quotes come out
// as escapes (\n, \x1b, \\, \"), and long text is cut, so that no peer can
// end a log line early and forge the next one ("... checkpoint deleted"),
// colour a terminal or fill the log.
//
// Thread-safe: a pure function.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ps {

// `text` escaped as above and cut after `max_bytes` of input (then "...").
std::string Printable(std::string_view text, size_t max_bytes = 64);

}  // namespace ps
