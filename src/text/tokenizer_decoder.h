// Decoders of tokenizer.json: they turn the token strings of a sequence back into text.
// Supported: ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, BPEDecoder, Sequence.
//
// Each decoder works on the whole list of token strings (HF's decode_chain). To decode a long
// stream in pieces (the incremental detokenizer) a decoder is told whether its list starts the
// sequence and whether it ends it, and it can say that the text decoded so far is not final
// yet (an incomplete UTF-8 character, a run of byte tokens that may continue, ...). Decoding in
// pieces cut only where no decoder holds back gives exactly the text of one decode.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace strata::text {

struct DecodePosition {
  bool at_start = true;  // the first token of the list is the first of the sequence
  bool at_end = true;    // the last token of the list is the last of the sequence
};

// What a decoder may look at to decide that decoding must wait for more tokens.
struct HoldQuery {
  std::span<const std::string> window;  // raw strings of the pending tokens, newest last
  std::string_view decoded;             // what they decode to right now
  bool at_start = true;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the list of token strings. `fused` is set once the list stands for the whole text
  // rather than one entry per token (after Fuse or ByteLevel).
  virtual void decode_chain(std::vector<std::string>& tokens, bool& fused,
                            const DecodePosition& pos) const = 0;
  // True when the text decoded so far could still change if more tokens followed.
  virtual bool holds_back(const HoldQuery& q) const { return false; }
};

// nullptr for JSON null. `where` names the file and field for error messages.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec, const std::string& where);

// Runs the decoder over the tokens and joins the result; without a decoder HF joins the tokens
// with spaces, so a list that continues a sequence starts with one.
std::string decode_token_strings(const Decoder* decoder, std::vector<std::string> tokens,
                                 const DecodePosition& pos);

}  // namespace strata::text
