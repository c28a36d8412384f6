// The sample processor's jobs, each on its own: which member is what (member_roles.h), the
// labels (sample_labels.h) and --instances (instances.h). Inputs are built by hand here and
// every expected value is written out, not computed by the code under test.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "common/error.h"
#include "convert/instances.h"
#include "convert/member_roles.h"
#include "convert/sample_labels.h"
#include "support/values.h"

using namespace tarmac;
using tarmac::test::values_of;

namespace {

Member member_of(const std::string& name, const std::string& bytes = "x") {
  return Member(name, std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

std::vector<const Member*> pointers_to(const std::vector<Member>& members) {
  std::vector<const Member*> out;
  for (const auto& m : members) out.push_back(&m);
  return out;
}

// A numeric field of int64 values and shape.
SampleField i64_field(const std::string& name, std::vector<int64_t> values,
                      std::vector<int64_t> shape) {
  SampleField f{name, "k.json", "json", {}};
  f.value.dtype = DType::I64;
  f.value.shape = std::move(shape);
  f.value.data.resize(values.size() * sizeof(int64_t));
  std::memcpy(f.value.data.data(), values.data(), f.value.data.size());
  return f;
}

SampleField json_field(const std::string& name, const std::string& text) {
  SampleField f{name, "k.json", "json", {}};
  f.value.kind = FieldValue::Kind::Json;
  f.value.data.assign(text.begin(), text.end());
  return f;
}

const SampleField* named(const std::vector<SampleField>& fields, const std::string& name) {
  for (const auto& f : fields)
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<std::string> names_in(const std::vector<SampleField>& fields) {
  std::vector<std::string> out;
  for (const auto& f : fields) out.push_back(f.name);
  return out;
}

// The message and code of what `f` throws as a SampleError.
template <class F>
std::pair<std::string, ErrorCode> refusal_of(F&& f) {
  try {
    f();
  } catch (const SampleError& e) {
    return {e.what(), e.code()};
  }
  FAIL("no SampleError thrown");
  return {};
}

}  // namespace

TEST_CASE(
    "sort_members: the image by --image's order, dense maps by suffix, labels, the rest ignored") {
  MemberRoles roles;
  roles.image_exts = {"png", "jpg"};
  roles.dense = {"depth.png"};
  const std::vector<Member> members = {member_of("k.jpg"), member_of("k.depth.png"),
                                       member_of("k.png"), member_of("k.json"), member_of("k.xyz")};
  const SampleMembers s = sort_members(pointers_to(members), roles);
  REQUIRE(s.image == &members[2]);  // png is preferred to jpg
  REQUIRE(s.dense.size() == 1);
  CHECK(s.dense[0] == &members[1]);
  REQUIRE(s.labels.size() == 1);
  CHECK(s.labels[0].first == &members[3]);
  CHECK(s.labels[0].second == "json");
  REQUIRE(s.ignored.size() == 2);
  CHECK(s.ignored[0].member == "k.jpg");
  CHECK(s.ignored[0].code == ErrorCode::SecondImage);
  CHECK(s.ignored[0].reason == "a second image member of the sample; 'k.png' is used");
  CHECK(s.ignored[1].member == "k.xyz");
  CHECK(s.ignored[1].code == ErrorCode::UnusedMember);
  CHECK(s.ignored[1].reason == "extension '.xyz' is neither an image, a dense map nor a label");
}

TEST_CASE("sort_members: one member of an image's last extension is the image; two are refused") {
  MemberRoles roles;
  RawSample raw;
  raw.key = "k";
  SECTION("one") {
    const std::vector<Member> members = {member_of("k.rgb.png"), member_of("k.txt")};
    const SampleMembers s = sort_members(pointers_to(members), roles);
    CHECK(s.image == &members[0]);
    CHECK(s.ignored.empty());
    CHECK_NOTHROW(check_image_found(s, raw, roles));
  }
  SECTION("two, with names numbered after the key: the key rule is named") {
    const std::vector<Member> members = {member_of("k.01.png"), member_of("k.02.png")};
    raw.members = members;
    const SampleMembers s = sort_members(pointers_to(members), roles);
    CHECK(s.image == nullptr);
    const auto [what, code] = refusal_of([&] { check_image_found(s, raw, roles); });
    CHECK(code == ErrorCode::AmbiguousImage);
    CHECK(what.find("'k.01.png' and 'k.02.png'") != std::string::npos);
    CHECK(what.find("--key-rule last-dot") != std::string::npos);
  }
  SECTION("two roles: --image is named for each") {
    const std::vector<Member> members = {member_of("k.rgb.png"), member_of("k.seg.png")};
    const SampleMembers s = sort_members(pointers_to(members), roles);
    const auto [what, code] = refusal_of([&] { check_image_found(s, raw, roles); });
    CHECK(code == ErrorCode::AmbiguousImage);
    CHECK(what.find("pass --image rgb.png or --image seg.png") != std::string::npos);
  }
  SECTION("beside an image named in full, it is left out with the --dense that keeps it") {
    const std::vector<Member> members = {member_of("k.png"), member_of("k.mask.png")};
    const SampleMembers s = sort_members(pointers_to(members), roles);
    CHECK(s.image == &members[0]);
    REQUIRE(s.ignored.size() == 1);
    CHECK(s.ignored[0].member == "k.mask.png");
    CHECK(s.ignored[0].reason.find("pass --dense mask.png") != std::string::npos);
  }
}

TEST_CASE("check_image_found and check_dense_found name what is missing") {
  MemberRoles roles;
  roles.image_exts = {"jpg", "png"};
  roles.dense = {"depth.png", "normal.png"};
  RawSample raw;
  raw.key = "k";
  raw.members = {member_of("k.json"), member_of("k.depth.png")};
  const SampleMembers s = sort_members(pointers_to(raw.members), roles);
  const auto [what, code] = refusal_of([&] { check_image_found(s, raw, roles); });
  CHECK(code == ErrorCode::NoImage);
  CHECK(what ==
        "sample has no image member (a name ending in .jpg or .png; --image names others); its "
        "members: 'k.json' and 'k.depth.png'");
  const auto [dense_what, dense_code] = refusal_of([&] { check_dense_found(s, roles); });
  CHECK(dense_code == ErrorCode::NoDenseMap);
  CHECK(dense_what == "sample has no dense map member '.normal.png'");
}

TEST_CASE("--no-images: image members are neither the image nor labels") {
  MemberRoles roles;
  roles.no_images = true;
  const std::vector<Member> members = {member_of("k.png"), member_of("k.cls")};
  const SampleMembers s = sort_members(pointers_to(members), roles);
  CHECK(s.image == nullptr);
  REQUIRE(s.labels.size() == 1);
  CHECK(s.labels[0].first == &members[1]);
  REQUIRE(s.ignored.size() == 1);
  CHECK(s.ignored[0].member == "k.png");
  CHECK(s.ignored[0].code == ErrorCode::UnusedMember);
}

TEST_CASE("parse_label_member: fields by extension, a name from two members refused") {
  std::vector<SampleField> fields;
  parse_label_member(member_of("k.json", R"({"id": 3, "meta": {"w": 2}})"), "json", 1 << 20,
                     fields);
  parse_label_member(member_of("k.caption.txt", "a cat\n"), "caption.txt", 1 << 20, fields);
  REQUIRE(names_in(fields) == std::vector<std::string>{"id", "meta.w", "caption"});
  CHECK(values_of<int64_t>(fields[0].value) == std::vector<int64_t>{3});
  CHECK(fields[2].member == "k.caption.txt");
  CHECK(fields[2].source == "caption.txt");
  const auto [what, code] = refusal_of([&] {
    parse_label_member(member_of("k.more.json", R"({"caption": "x"})"), "json", 1 << 20, fields);
  });
  CHECK(code == ErrorCode::BadField);
  CHECK(what == "field 'caption' comes from both member 'k.caption.txt' and member 'k.more.json'");
  CHECK(label_error_code("smpl.npz") == ErrorCode::BadNpz);
  CHECK(label_error_code("json") == ErrorCode::BadJson);
  CHECK(label_error_code("cls") == ErrorCode::BadText);
}

TEST_CASE("check_label_sizes refuses a label over the bound, never an image or dense map") {
  MemberRoles roles;
  roles.dense = {"depth.png"};
  RawSample raw;
  raw.members = {member_of("k.png", std::string(100, 'p')),
                 member_of("k.depth.png", std::string(100, 'd')),
                 member_of("k.json", std::string(10, ' '))};
  CHECK_NOTHROW(check_label_sizes(raw, roles, 10));
  raw.members.push_back(member_of("k.meta.json", std::string(11, ' ')));
  const auto [what, code] = refusal_of([&] { check_label_sizes(raw, roles, 10); });
  CHECK(code == ErrorCode::MemberTooLarge);
  CHECK(what.starts_with("member 'k.meta.json': the label member is "));
  CHECK(what.find("raise --max-label-size") != std::string::npos);
}

TEST_CASE("check_required, add_class and select_fields") {
  LabelRecipe labels;
  std::vector<SampleField> fields = {i64_field("a", {1}, {}), i64_field("b", {2}, {}),
                                     i64_field("__row__", {0}, {})};
  fields[1].value.null = true;
  labels.require_fields = {"a"};
  CHECK_NOTHROW(check_required(fields, labels));
  labels.require_fields = {"a", "b"};
  CHECK(refusal_of([&] { check_required(fields, labels); }).first ==
        "required field 'b' is null (--require b)");
  labels.require_fields = {"c"};
  CHECK(refusal_of([&] { check_required(fields, labels); }).first ==
        "required field 'c' is missing (--require c)");

  add_class(member_of("root/dog/1.jpg"), {"cat", "dog"}, fields);
  const SampleField* cls = named(fields, "cls");
  REQUIRE(cls);
  CHECK(values_of<int64_t>(cls->value) == std::vector<int64_t>{1});
  CHECK(refusal_of([&] {
          add_class(member_of("root/dog/2.jpg"), {"cat", "dog"}, fields);
        }).first.find("comes from both") != std::string::npos);
  std::vector<SampleField> none;
  CHECK(refusal_of([&] {
          add_class(member_of("1.jpg"), {"cat"}, none);
        }).first.find("in no folder") != std::string::npos);
  CHECK(refusal_of([&] {
          add_class(member_of("bird/1.jpg"), {"cat"}, none);
        }).first.find("not among the run's classes") != std::string::npos);

  labels.keep_fields = {"b"};
  std::vector<SampleField> kept = fields;
  select_fields(kept, labels);
  CHECK(names_in(kept) == std::vector<std::string>{"b", "__row__"});  // __row__ always stays
  labels.keep_fields.clear();
  labels.drop_fields = {"a", "cls"};
  select_fields(fields, labels);
  CHECK(names_in(fields) == std::vector<std::string>{"b", "__row__"});
}

TEST_CASE("split_instances: sliced fields by entry, the others copied, __row__ numbered") {
  LabelRecipe labels;
  labels.instances = "boxes";
  labels.instance_fields = {"cats", "areas"};
  SampleLimits limits;
  const std::vector<SampleField> fields = {
      i64_field("boxes", {1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}),
      json_field("cats", R"([{"id": 7}, {"id": 9}])"),
      i64_field("image_id", {42}, {}),
  };
  const auto sets = split_instances(fields, labels, limits);
  REQUIRE(sets.size() == 2);
  for (int k = 0; k < 2; ++k) {
    const auto& set = sets[static_cast<size_t>(k)];
    CHECK(names_in(set) == std::vector<std::string>{"boxes", "cats.id", "image_id", "__row__"});
    const SampleField* box = named(set, "boxes");
    REQUIRE(box);
    CHECK(box->value.shape == std::vector<int64_t>{4});
    CHECK(values_of<int64_t>(box->value) ==
          (k == 0 ? std::vector<int64_t>{1, 2, 3, 4} : std::vector<int64_t>{5, 6, 7, 8}));
    CHECK(values_of<int64_t>(named(set, "cats.id")->value) == std::vector<int64_t>{k == 0 ? 7 : 9});
    CHECK(values_of<int64_t>(named(set, "image_id")->value) == std::vector<int64_t>{42});
    CHECK(values_of<int64_t>(named(set, "__row__")->value) == std::vector<int64_t>{k});
  }
}

TEST_CASE("split_instances refuses what it cannot slice, naming the field and the flag") {
  LabelRecipe labels;
  labels.instances = "boxes";
  labels.instance_fields = {"cats"};
  SampleLimits limits;
  std::vector<SampleField> fields = {i64_field("boxes", {1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}),
                                     json_field("cats", R"([{"id": 7}])")};
  auto [what, code] = refusal_of([&] { split_instances(fields, labels, limits); });
  CHECK(code == ErrorCode::BadField);
  CHECK(what ==
        "instance field 'cats' (member 'k.json') has 1 entries but instances field 'boxes' has 2 "
        "(--instance-fields)");
  fields[1] = json_field("cats", R"([{"id": 7}, {"id": 9}])");
  limits.max_outputs_per_sample = 1;
  std::tie(what, code) = refusal_of([&] { split_instances(fields, labels, limits); });
  CHECK(what.starts_with(
      "instances field 'boxes' (--instances) has 2 entries, more than --max-outputs-per-sample 1"));
  limits.max_outputs_per_sample = 100;
  fields[0] = i64_field("boxes", {3}, {});
  std::tie(what, code) = refusal_of([&] { split_instances(fields, labels, limits); });
  CHECK(what.find("has shape") != std::string::npos);
  CHECK(what.find("it needs a first axis") != std::string::npos);
  labels.instances = "nope";
  std::tie(what, code) = refusal_of([&] { split_instances(fields, labels, limits); });
  CHECK(what == "instances field 'nope' is missing (--instances nope)");
}
