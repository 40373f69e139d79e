#include "server/openai_errors.h"

namespace strata::server {

namespace {

// Cuts at a UTF-8 boundary so the body stays valid JSON text.
std::string bounded(std::string message) {
  if (message.size() <= kMaxErrorMessageBytes) return message;
  size_t cut = kMaxErrorMessageBytes;
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80)
    --cut;
  message.resize(cut);
  return message + "...";
}

ApiError make(int status, std::string type, std::string message, std::string param = {}) {
  ApiError e;
  e.status = status;
  e.type = std::move(type);
  e.message = bounded(std::move(message));
  e.param = bounded(std::move(param));
  return e;
}

}  // namespace

nlohmann::json ApiError::body() const {
  nlohmann::json inner = nlohmann::json::object();
  inner["message"] = bounded(message);
  inner["type"] = type;
  inner["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(bounded(param));
  inner["code"] = status;
  return {{"error", inner}};
}

std::string ApiError::body_text() const {
  return dump_json(body());
}

ApiError bad_request(std::string message, std::string param) {
  return make(400, "BadRequestError", std::move(message), std::move(param));
}
ApiError model_not_found(const std::string& model) {
  return make(404, "NotFoundError", "The model `" + model + "` does not exist.", "model");
}
ApiError not_found(std::string message) {
  return make(404, "NotFoundError", std::move(message));
}
ApiError method_not_allowed(std::string message) {
  return make(405, "MethodNotAllowedError", std::move(message));
}
ApiError unauthorized() {
  return make(401, "AuthenticationError", "Unauthorized");
}
ApiError payload_too_large(size_t limit_bytes) {
  return make(
      413, "RequestEntityTooLargeError",
      "The request body is larger than the limit of " + std::to_string(limit_bytes) + " bytes.");
}
ApiError service_unavailable(std::string message) {
  return make(503, "ServiceUnavailableError", std::move(message));
}
ApiError not_implemented(std::string message, std::string param) {
  return make(501, "NotImplementedError", std::move(message), std::move(param));
}
ApiError internal_error(std::string message) {
  return make(500, "InternalServerError", std::move(message));
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace strata::server
