// Pipeline plans read from published records (simulator/src/validation_pipeline.cpp): per-stage layer counts under
// their names and as text, uneven splits balanced where unstated, interleaved schedules' virtual stages, named schedules.
#include "validation_support.hpp"

#include "tessel/sim/validation.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tessel::sim {
namespace {
using test::load;
using test::llama405;
using test::mentions;
using test::onNodes;
using test::record;
using test::refusalOf;

TEST(ValidationRecord, UnevenPipelineSplitsAreReadOrBalancedNeverRefused) {
    // Not stated: the embedding and the loss counted as a layer each, as the frameworks split, which is Meta's
    // own split of Llama 3 405B.
    ValidationCase c = load(llama405(8192, 1, 8192));
    EXPECT_EQ(pipelineSplitText(c.scenario.model, c.scenario.plan), "7,8x14,7");
    EXPECT_TRUE(mentions(c.assumptions, "counted as a layer each, as the frameworks split (7,8x14,7)"));
    // Stated as balanced: the time-balanced split.
    nlohmann::json balanced = llama405(8192, 1, 8192);
    balanced["plan"]["pipeline_split"] = "balanced";
    EXPECT_EQ(load(balanced).scenario.plan.pipelineSplit, PipelineSplit::Balanced);
    // Stated in Megatron-LM's words.
    nlohmann::json stated = llama405(8192, 1, 8192);
    stated["plan"]["num_layers_in_first_pipeline_stage"] = 6;
    stated["plan"]["num_layers_in_last_pipeline_stage"] = 8;
    c = load(stated);
    EXPECT_EQ(pipelineSplitText(c.scenario.model, c.scenario.plan), "6,8x15");
    EXPECT_FALSE(mentions(c.assumptions, "as the frameworks split"));
    // 70 layers on 12 stages.
    nlohmann::json seventy = onNodes(record(), 12, 8, 12);
    seventy["model"]["layers"] = 70;
    c = load(seventy);
    // BLOOM-176B's split (70 layers, pp 12, Megatron-DeepSpeed partition "type:transformer|embedding").
    EXPECT_EQ(pipelineSplitText(c.scenario.model, c.scenario.plan), "5,6x10,5");
}

// The order of the parallel dimensions over the ranks, as records state it: tessel's rank_order, the Llama 3 paper's
// "[TP, CP, PP, DP]" (ep, which it leaves out, after cp as in Megatron-core's orders), Megatron-LM's
// --use-tp-pp-dp-mapping. It had not been read (tessel's default order taken in silence); one that does not read is
// refused naming its field.
TEST(ValidationRecord, ARecordsRankOrderIsRead) {
    nlohmann::json r = llama405(8192, 1, 8192);
    EXPECT_EQ(load(r).scenario.plan.rankOrderString(), "tp-cp-ep-dp-pp"); // unstated: Megatron-core's order
    r["plan"]["parallelism_order"] = "[TP, CP, PP, DP]";
    EXPECT_EQ(load(r).scenario.plan.rankOrderString(), "tp-cp-ep-pp-dp");
    r["plan"].erase("parallelism_order");
    r["plan"]["rank_order"] = nlohmann::json::array({"tp", "pp", "cp", "ep", "dp"});
    EXPECT_EQ(load(r).scenario.plan.rankOrderString(), "tp-pp-cp-ep-dp");
    r["plan"].erase("rank_order");
    r["plan"]["use_tp_pp_dp_mapping"] = true;
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.rankOrderString(), "tp-cp-ep-pp-dp");
    EXPECT_TRUE(mentions(c.assumptions, "use_tp_pp_dp_mapping"));
    r["plan"].erase("use_tp_pp_dp_mapping");
    r["plan"]["rank_order"] = "tp-dp-tp-pp";
    const std::string why = refusalOf(r);
    EXPECT_NE(why.find("/plan/rank_order"), std::string::npos) << why;
    EXPECT_NE(why.find("tp-dp-tp-pp"), std::string::npos) << why;
}

// Megatron-core's --pipeline-model-parallel-layout names every virtual stage's layers; pipeline_split may hold counts
// as well as a word. Both had been passed over (the frameworks' split taken instead, in silence).
TEST(ValidationRecord, MegatronCoresPipelineLayoutAndASplitOfCountsAreRead) {
    nlohmann::json r = llama405(8192, 1, 8192); // 126 layers, pp 16
    r["plan"].erase("vpp");
    r["plan"]["pipeline_model_parallel_layout"] = "Et*6|(t*8|)*14t*8L";
    ValidationCase c = load(r);
    EXPECT_EQ(pipelineSplitText(c.scenario.model, c.scenario.plan), "6,8x15");
    EXPECT_EQ(c.scenario.plan.vpp, 1);
    EXPECT_TRUE(mentions(c.assumptions, "pipeline layout \"Et*6|(t*8|)*14t*8L\": 6,8,8"));
    EXPECT_FALSE(mentions(c.assumptions, "as the frameworks split"));
    // Twice as many stages as pp: its virtual stages give the vpp, interleaved.
    r["plan"]["pipeline_model_parallel_layout"] = "E(t*4|)*31t*2L";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 2);
    EXPECT_EQ(c.scenario.plan.schedule, Schedule::Interleaved1F1B);
    EXPECT_EQ(c.scenario.plan.pipelineLayers.size(), 32u);
    EXPECT_TRUE(mentions(c.assumptions, "vpp = 2, the layout's 32 virtual stages over pp 16"));
    // The embedding alone in the first stage ("E|"), the loss alone in the last ("|L"): stages of no layer at the ends.
    r["plan"]["pipeline_model_parallel_layout"] = "E|(t*8|)*14t*14L";
    c = load(r);
    EXPECT_EQ(pipelineSplitText(c.scenario.model, c.scenario.plan), "0,8x14,14");
    r["plan"]["pipeline_model_parallel_layout"] = "E|(t*9|)*14L";
    EXPECT_EQ(pipelineSplitText(load(r).scenario.model, load(r).scenario.plan), "0,9x14,0");
    // What tessel cannot express, or what is no layout, is refused naming the field: a stage in between of no layer.
    r["plan"]["pipeline_model_parallel_layout"] = "Et*8||(t*8|)*13t*14L";
    EXPECT_NE(test::refusalOf(r).find("/plan/pipeline_model_parallel_layout: \"Et*8||(t*8|)*13t*14L\" leaves virtual stage 1 without"),
              std::string::npos) << test::refusalOf(r);
    r["plan"]["pipeline_model_parallel_layout"] = "Et*8|q";
    EXPECT_NE(test::refusalOf(r).find("is not a layout"), std::string::npos) << test::refusalOf(r);
    r["plan"]["pipeline_model_parallel_layout"] = "Et*8|t*8L";
    EXPECT_NE(test::refusalOf(r).find("has 2 stages, not pp x vpp = 16"), std::string::npos) << test::refusalOf(r);
    // Beside a stated vpp, the layout's stages must be pp x vpp.
    r["plan"]["vpp"] = 1;
    r["plan"]["pipeline_model_parallel_layout"] = "E(t*4|)*31t*2L";
    EXPECT_NE(test::refusalOf(r).find("has 32 stages, not pp x vpp = 16"), std::string::npos) << test::refusalOf(r);
    // A split written as counts under pipeline_split.
    r["plan"].erase("pipeline_model_parallel_layout");
    r["plan"]["pipeline_split"] = "6,8x15";
    EXPECT_EQ(pipelineSplitText(load(r).scenario.model, load(r).scenario.plan), "6,8x15");
    // 0 at an end (the embedding or the loss alone), never in between.
    r["plan"]["pipeline_split"] = "0,9x14,0";
    EXPECT_EQ(pipelineSplitText(load(r).scenario.model, load(r).scenario.plan), "0,9x14,0");
    r["plan"]["pipeline_split"] = "9,0,9x13,0";
    EXPECT_NE(test::refusalOf(r).find("0 only for the first or the last stage"), std::string::npos) << test::refusalOf(r);
}

// Megatron-Bridge's Llama 3.1 405B on GB200 (pp 16 x vp 8 = 128 virtual stages for 126 layers, its recipes'
// account_for_embedding/loss_in_pipeline_split): the embedding and the loss each take a virtual stage of their own,
// every other virtual stage one layer (Megatron-core get_num_layers_to_build); 127 layers put one with the embedding.
TEST(ValidationRecord, MoreVirtualStagesThanLayersGiveTheEndsAStageEach) {
    nlohmann::json r = llama405(8192, 1, 8192); // 126 layers, pp 16
    r["plan"]["vpp"] = 8;
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.pipelineSplit, PipelineSplit::EndsAsLayers);
    EXPECT_EQ(pipelineSplitText(c.scenario.model, c.scenario.plan), "0,1x126,0");
    EXPECT_TRUE(mentions(c.assumptions, "(0,1x126,0)"));
    r["model"]["layers"] = 127;
    c = load(r);
    EXPECT_EQ(pipelineSplitText(c.scenario.model, c.scenario.plan), "1x127,0");
    // Three short of the virtual stages is no split any framework makes: refused, naming the vpp.
    r["model"]["layers"] = 125;
    EXPECT_NE(test::refusalOf(r).find("/plan/vpp"), std::string::npos) << test::refusalOf(r);
}

TEST(ValidationRecord, AnInterleavedScheduleWithoutVirtualStagesGetsTwoLayersEach) {
    // Meta describes an interleaved schedule for Llama 3 405B but prints no virtual-stage count: 126 layers + the
    // embedding and the loss on 16 stages, two layers per virtual stage -> vpp 4.
    nlohmann::json r = llama405(8192, 1, 8192);
    r["plan"].erase("vpp");
    r["plan"]["schedule"] = "interleaved 1F1B (Narayanan et al. 2021)";
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 4);
    EXPECT_EQ(c.scenario.plan.schedule, Schedule::Interleaved1F1B);
    EXPECT_TRUE(mentions(c.assumptions, "interleaved schedule without a vpp: vpp = 4"));
    // Saying nothing under Megatron-LM is its published runs' schedule, interleaved, and said so; under a framework
    // whose pipeline does not interleave (DeepSpeed's engine) it is 1F1B, said so too.
    r["plan"].erase("schedule");
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 4);
    EXPECT_TRUE(mentions(c.assumptions, "no schedule stated: interleaved, as the published Megatron-LM runs are"));
    nlohmann::json ds = r;
    ds["plan"]["framework"] = "Megatron-DeepSpeed (DeepSpeed pipeline engine)";
    c = load(ds);
    EXPECT_EQ(c.scenario.plan.vpp, 1);
    EXPECT_TRUE(mentions(c.assumptions, "vpp not stated: 1"));
    // A schedule named 1F1B is 1F1B; techniques that mention the pipeline's bubble name no schedule.
    r["plan"]["schedule"] = "1F1B";
    EXPECT_EQ(load(r).scenario.plan.vpp, 1);
    r["plan"].erase("schedule");
    r["plan"]["techniques"] = "pipeline bubble kept small by many micro-batches";
    EXPECT_EQ(load(r).scenario.plan.vpp, 4);
    r["plan"].erase("techniques");
    // The record's notes say it: interleaved; notes that also deny it somewhere are no reading.
    r["notes"] = "Meta's 4D parallelism: interleaved 1F1B with tuned micro-batches per stage (section 3.3.2).";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 4);
    r["notes"] = "the paper mentions the interleaved schedule, but this size ran non-interleaved";
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 1);
    r.erase("notes");
    // Micro-batches that pp does not divide cannot interleave in Megatron-LM: 1F1B, said so.
    r["plan"]["schedule"] = "interleaved";
    r["plan"]["global_batch"] = 64 * 15;
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 1);
    EXPECT_TRUE(mentions(c.assumptions, "but its 15 micro-batches a step do not divide by pp = 16"));

    // Meta's own words on top: one layer fewer on the first and the last stage. The inferred vpp 4 does not
    // divide 7, which Megatron-LM's rule would refuse; the vpp is tessel's reading, so the missing layer comes
    // off the chunk with the embedding / the loss instead.
    r["plan"]["global_batch"] = 64 * 32;
    r["plan"]["first_stage_layers"] = 7;
    r["plan"]["last_stage_layers"] = 7;
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 4);
    EXPECT_EQ(pipelineSplitText(c.scenario.model, c.scenario.plan), "1,2x62,1");
    EXPECT_TRUE(mentions(c.assumptions, "the layers they lack come off the chunk with the embedding / the loss (1,2x62,1)"));
    // A vpp the stated ranks cannot take is not inferred: a first rank of 3 layers cannot fill 4 chunks, so two
    // layers per virtual stage gives way to vpp 2 (first rank 1 + 2, the others 4 + 4, the last 6 + 5).
    r["plan"]["first_stage_layers"] = 3;
    r["plan"]["last_stage_layers"] = 11;
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 2);
    EXPECT_EQ(chunkLayerCount(c.scenario.model, c.scenario.plan, 0, 0), 1);
    EXPECT_EQ(chunkLayerCount(c.scenario.model, c.scenario.plan, 0, 1), 2);
    EXPECT_EQ(chunkLayerCount(c.scenario.model, c.scenario.plan, 15, 0), 6);
    EXPECT_EQ(chunkLayerCount(c.scenario.model, c.scenario.plan, 15, 1), 5);
    EXPECT_EQ(chunkLayerCount(c.scenario.model, c.scenario.plan, 7, 1), 4);
}

// Where no chunk of two or more layers splits a stage's layers, an interleaved schedule without a count runs one layer
// per virtual stage (NVIDIA's Nemotron-4 340B recipes: pp 8 x vp 12 over 96 layers). Megatron-LM's README 119B:
// 92 layers on pp 4, 23 a stage (a prime): vpp 23.
TEST(ValidationRecord, AnInterleavedScheduleFallsBackToOneLayerPerVirtualStage) {
    nlohmann::json r = llama405(8192, 1, 8192);
    r["plan"].erase("vpp");
    r["plan"]["pp"] = 4;
    r["plan"]["dp"] = 8192 / (8 * 4);
    r["plan"]["global_batch"] = 256 * 16;
    r["model"]["layers"] = 92;
    ValidationCase c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 23);
    EXPECT_EQ(c.scenario.plan.schedule, Schedule::Interleaved1F1B);
    EXPECT_TRUE(mentions(c.assumptions, "vpp = 23 (one layer per virtual stage; no split of two or more fits)"));
    // 93 layers on pp 4 split no way (23.25 a stage, 95 with the embedding and loss neither): 1F1B, said.
    r["model"]["layers"] = 93;
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 1);
    EXPECT_TRUE(mentions(c.assumptions, "no split of one or two layers per virtual stage fits: 1F1B"));
    // 96 layers on pp 12: two layers per virtual stage (vpp 4), not one.
    r["model"]["layers"] = 96;
    r["plan"]["pp"] = 12;
    r["plan"]["dp"] = 64;
    r["system"]["total_gpus"] = 8 * 12 * 64;
    r["system"]["nodes"] = 12 * 64;
    r["plan"]["global_batch"] = 64 * 24;
    c = load(r);
    EXPECT_EQ(c.scenario.plan.vpp, 4);
}

TEST(ValidationRecord, NamedSchedulesAreSimulatedOrTheReadingIsSaid) {
    auto withSchedule = [](const char* key, const char* name) {
        nlohmann::json r = record();
        r["plan"][key] = name;
        return load(r);
    };
    ASSERT_GT(load(record()).scenario.plan.pp, 1);
    // GPipe and zero bubble are schedules tessel simulates, under the keys and words records use.
    for (const char* key : {"schedule", "pipeline_schedule", "pp_schedule", "pipeline_parallel_schedule"}) {
        const ValidationCase g = withSchedule(key, "GPipe");
        EXPECT_EQ(g.scenario.plan.schedule, Schedule::Gpipe) << key;
        EXPECT_TRUE(mentions(g.assumptions, "pipeline schedule read as GPipe")) << key;
        EXPECT_EQ(withSchedule(key, "ZBVZeroBubble").scenario.plan.schedule, Schedule::ZeroBubbleV) << key;
        EXPECT_EQ(withSchedule(key, "ZBVZeroBubble").scenario.plan.vpp, 2) << key;
    }
    EXPECT_EQ(withSchedule("schedule", "zero bubble (ZB-H1)").scenario.plan.schedule, Schedule::ZeroBubble);
    EXPECT_EQ(withSchedule("schedule", "fill-drain").scenario.plan.schedule, Schedule::Gpipe);
    // 1F1B named is 1F1B, with nothing to say; interleaved under torchtitan's key interleaves.
    const ValidationCase plain = withSchedule("pp_schedule", "1F1B");
    EXPECT_EQ(plain.scenario.plan.schedule, Schedule::OneFOneB);
    EXPECT_FALSE(mentions(plain.assumptions, "pipeline schedule"));
    nlohmann::json noVpp = record();
    noVpp["plan"].erase("vpp");
    noVpp["plan"]["pipeline_parallel_schedule"] = "Interleaved1F1B";
    EXPECT_EQ(load(noVpp).scenario.plan.schedule, Schedule::Interleaved1F1B);
    // One tessel does not simulate keeps 1F1B, and says so rather than reading it silently.
    const ValidationCase looped = withSchedule("pp_schedule", "LoopedBFS");
    EXPECT_EQ(looped.scenario.plan.schedule, Schedule::OneFOneB);
    EXPECT_TRUE(mentions(looped.assumptions, "pipeline schedule \"loopedbfs\" is not one tessel simulates: read as 1F1B"));
    // DualPipe and DualPipeV run as DualPipeV (8 micro-batches >= 2 x pp), two chunks a rank; DualPipe's second
    // parameter copy is said not counted. Too few micro-batches for it: 1F1B, said.
    const ValidationCase dual = withSchedule("pp_schedule", "DualPipe");
    EXPECT_EQ(dual.scenario.plan.schedule, Schedule::DualPipeV);
    EXPECT_EQ(dual.scenario.plan.vpp, 2);
    EXPECT_TRUE(mentions(dual.assumptions, "DualPipe read as DualPipeV"));
    EXPECT_EQ(withSchedule("pipeline_parallel_schedule", "DualPipeV").scenario.plan.schedule, Schedule::DualPipeV);
    nlohmann::json few = record();
    few["plan"]["global_batch"] = 16;
    few["plan"]["schedule"] = "DualPipe";
    const ValidationCase tooFew = load(few);
    EXPECT_EQ(tooFew.scenario.plan.schedule, Schedule::OneFOneB);
    EXPECT_TRUE(mentions(tooFew.assumptions, "DualPipe named, but 2 micro-batches a step, fewer than its 2 x pp: read as 1F1B"));
    // Zero bubble with virtual stages (InterleavedZeroBubble) is simulated without them: interleaved 1F1B, said.
    nlohmann::json r = record();
    r["plan"]["vpp"] = 2;
    r["plan"]["pp_schedule"] = "InterleavedZeroBubble";
    const ValidationCase izb = load(r);
    EXPECT_EQ(izb.scenario.plan.schedule, Schedule::Interleaved1F1B);
    EXPECT_TRUE(mentions(izb.assumptions, "read as interleaved 1F1B"));
}

TEST(ValidationRecord, PerStageLayerCountsUnderOtherNamesAndAsText) {
    nlohmann::json r = record(); // 32 layers on pp 2
    for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
             {"pp_layers", "15,17"}, {"layers_per_stage", nlohmann::json::array({15, 17})}, {"pipeline_layers", "15, 17"}}) {
        nlohmann::json named = r;
        named["plan"][key] = value;
        EXPECT_EQ(load(named).scenario.plan.pipelineLayers, (std::vector<int>{15, 17})) << key;
    }
    nlohmann::json repeated = r;
    repeated["plan"]["pipeline_layers"] = "16x2";
    EXPECT_EQ(load(repeated).scenario.plan.pipelineLayers, (std::vector<int>{16, 16}));
    // Text that is no list of counts is refused at its field, not dropped.
    for (const nlohmann::json& bad : {nlohmann::json("early, late"), nlohmann::json::array({15, "x"}), nlohmann::json(0)}) {
        nlohmann::json unread = r;
        unread["plan"]["stage_layers"] = bad;
        const std::string refusal = test::refusalOf(unread);
        EXPECT_NE(refusal.find("/plan/stage_layers"), std::string::npos) << refusal;
    }
}

// A split stated without a vpp gives it: one count a virtual stage. A Megatron-LM record that names no schedule is
// otherwise read as interleaved (its published runs are), and a list of pp counts had been refused against that vpp.
TEST(ValidationRecord, APerStageSplitWithoutAVppGivesIt) {
    nlohmann::json r = record(); // 32 layers, pp 2, Megatron-LM, 16 micro-batches a step
    r["plan"].erase("vpp");
    r["plan"]["pipeline_layers"] = nlohmann::json::array({15, 17});
    const ValidationCase plain = load(r);
    EXPECT_EQ(plain.scenario.plan.vpp, 1);
    EXPECT_EQ(plain.scenario.plan.schedule, Schedule::OneFOneB);
    EXPECT_EQ(plain.scenario.plan.pipelineLayers, (std::vector<int>{15, 17}));
    EXPECT_TRUE(mentions(plain.assumptions, "vpp = 1: the stated per-stage split lists 2 stages over pp 2"));
    r["plan"]["pipeline_layers"] = "7,9x2,7";
    const ValidationCase chunks = load(r);
    EXPECT_EQ(chunks.scenario.plan.vpp, 2);
    EXPECT_EQ(chunks.scenario.plan.schedule, Schedule::Interleaved1F1B);
    EXPECT_EQ(chunks.scenario.plan.pipelineLayers, (std::vector<int>{7, 9, 9, 7}));
    // A count of stages pp does not divide is no vpp: refused at the field, as before.
    r["plan"]["pipeline_layers"] = nlohmann::json::array({10, 11, 11});
    EXPECT_NE(test::refusalOf(r).find("/plan/pipeline_layers"), std::string::npos) << test::refusalOf(r);
}

} // namespace
} // namespace tessel::sim
