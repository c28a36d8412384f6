#include "remote/remote_config.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>

namespace tarmac::remote {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The keys of section `section` of an INI file as the AWS CLI writes them; nullopt when the
// file or the section is missing.
std::optional<std::map<std::string, std::string>> ini_section(const std::string& path,
                                                              const std::string& section) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::optional<std::map<std::string, std::string>> found;
  bool inside = false;
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      inside = trim(line.substr(1, line.size() - 2)) == section;
      if (inside && !found) found.emplace();
      continue;
    }
    const auto eq = line.find('=');
    if (inside && eq != std::string::npos)
      (*found)[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return found;
}

std::string home_file(const char* env_name, const char* under_home) {
  if (std::string p = env(env_name); !p.empty()) return p;
  const std::string home = env("HOME");
  return home.empty() ? "" : home + "/" + under_home;
}

}  // namespace

std::string RemoteConfig::s3_endpoint() const {
  std::string e = endpoint_url.empty() ? "https://s3." + region + ".amazonaws.com" : endpoint_url;
  while (!e.empty() && e.back() == '/') e.pop_back();
  return e;
}

RemoteConfig RemoteConfig::from_environment(const std::string& endpoint_url) {
  RemoteConfig c;
  const std::string profile_env = env("AWS_PROFILE");
  const std::string profile = profile_env.empty() ? "default" : profile_env;
  if (!env("AWS_ACCESS_KEY_ID").empty() && !env("AWS_SECRET_ACCESS_KEY").empty()) {
    c.access_key = env("AWS_ACCESS_KEY_ID");
    c.secret_key = env("AWS_SECRET_ACCESS_KEY");
    c.session_token = env("AWS_SESSION_TOKEN");
    c.credentials_from = "the environment (AWS_ACCESS_KEY_ID)";
  } else {
    const std::string file = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
    const auto keys = file.empty() ? std::nullopt : ini_section(file, profile);
    if (keys && keys->contains("aws_access_key_id") && keys->contains("aws_secret_access_key")) {
      c.access_key = keys->at("aws_access_key_id");
      c.secret_key = keys->at("aws_secret_access_key");
      if (keys->contains("aws_session_token")) c.session_token = keys->at("aws_session_token");
      c.credentials_from = "profile '" + profile + "' of " + file;
    } else if (!profile_env.empty()) {
      throw RemoteError("AWS_PROFILE names profile '" + profile + "', which " +
                        (file.empty() ? std::string("no credentials file") : "'" + file + "'") +
                        " does not hold with aws_access_key_id and aws_secret_access_key: add "
                        "it (aws configure --profile " +
                        profile + ") or unset AWS_PROFILE");
    }
  }
  const std::string config_file = home_file("AWS_CONFIG_FILE", ".aws/config");
  const auto settings =
      config_file.empty()
          ? std::nullopt
          : ini_section(config_file, profile == "default" ? profile : "profile " + profile);
  const auto setting = [&](const char* env_name, const char* key) {
    std::string v = env(env_name);
    if (v.empty() && settings && settings->contains(key)) v = settings->at(key);
    return v;
  };
  std::string region = env("AWS_REGION");
  if (region.empty()) region = setting("AWS_DEFAULT_REGION", "region");
  if (!region.empty()) c.region = region;
  c.ca_bundle = setting("AWS_CA_BUNDLE", "ca_bundle");
  c.endpoint_url = endpoint_url;
  if (c.endpoint_url.empty()) c.endpoint_url = env("AWS_ENDPOINT_URL_S3");
  if (c.endpoint_url.empty()) c.endpoint_url = env("AWS_ENDPOINT_URL");
  return c;
}

}  // namespace tarmac::remote
