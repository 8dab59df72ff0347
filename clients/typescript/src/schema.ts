/**
 * Generated from openapi.yaml by `npm run generate` (scripts/schema.ts): do not edit.
 */

export interface paths {
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Healthz */
        get: operations["healthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Readyz */
        get: operations["readyz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Metrics
         * @description Prometheus text format; OpenMetrics (with exemplars) when the scraper asks for it.
         *
         *     Under several workers (`PROMETHEUS_MULTIPROC_DIR` set) every worker's samples are merged,
         *     so any worker answers for all of them; exemplars are not kept in that mode. With
         *     `CTX_METRICS_TOKEN` set, the scraper must send it as a bearer token: the series name every
         *     tenant's units and phases.
         */
        get: operations["metrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Create Session */
        post: operations["create_session"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get Session */
        get: operations["get_session"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/items": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List Items */
        get: operations["list_items"];
        put?: never;
        /**
         * Append Items
         * @description Appends the items to the log. When they hold the model's output after a session-mode
         *     assembly, that assembly is graded against it after the answer (`grade_next_action`).
         */
        post: operations["append_items"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/usage": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Report Usage
         * @description Provider-reported usage, folded into the cache-status axis of the cost metrics. With an
         *     `assembly_id`, that assembly's predicted reused prefix is counted against the provider's
         *     cached tokens too, under the call's unit and phase, else the assembly's; and its
         *     `input_tokens` calibrate the session's model of provider tokens (an overhead and a ratio
         *     per encoding token), once per assembly (see the session's `tokenizer`). An assembly made
         *     for another session, or for none, is a 409 `assembly_of_another_session`.
         */
        post: operations["report_usage"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/retractions": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Retract
         * @description Hides item `seq` (the newest shown when none is given) from the active history, with
         *     its call or outputs (pairing holds). Refusals are 409s: `nothing_to_retract`,
         *     `not_in_active_history` (past the log included), `already_retracted`.
         */
        post: operations["retract"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/reset": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Reset
         * @description From here on the active history starts empty; the goal and world state stay.
         */
        post: operations["reset"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/recall": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Recall
         * @description Reads fact `seq` back in a window of whole lines, or lists the lines matching `pattern`
         *     in one fact or a seq range. Bounds beyond the service's caps are capped, and the answer
         *     states the bounds applied. A seq past the log, or a window past the fact's text, is a 409
         *     (`seq_past_log`, `window_past_text`): the session is there. A search stops at its bounds
         *     (matches, bytes given to the pattern, CPU seconds) and says which, and the fact and line to
         *     go on from; a tenant's searches under way at once are bounded (429).
         */
        post: operations["recall"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/evaluate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Evaluate
         * @description Replays the session's logged turns as a runtime would (append, assemble, compact when
         *     advised) under its own settings (`current`, first) and under each variant, on a scratch
         *     store: what each would have cost (reuse, fresh tokens, cost in the session's cache terms,
         *     compactions) and shown (goal, pairing, over-budget calls, next-action grounding). Writes
         *     nothing to the session, its plans or the metrics; the same log and variants give the same
         *     answer. A long one (or one asked with `Prefer: respond-async`) is a job: 202, and
         *     `GET /evaluations/{id}` follows it.
         */
        post: operations["evaluate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/evaluations/{evaluation_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get Evaluation
         * @description Where the evaluation job stands: `running` with its progress, `done` with its result,
         *     `failed` saying why (a job lost with its process says so), or `cancelled`.
         */
        get: operations["get_evaluation"];
        put?: never;
        post?: never;
        /**
         * Cancel Evaluation
         * @description Cancels the evaluation job if it is running (it stops at the call it is on); answers
         *     where it stands either way.
         */
        delete: operations["cancel_evaluation"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/history/normalize": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Normalize
         * @description Repairs a history (given, or a session's active one) and reports every repair.
         */
        post: operations["normalize"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/history": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get History */
        get: operations["get_history"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/assemble": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Assemble
         * @description Selects, places and accounts one context, and stores its plan under `assembly_id`
         *     (see `app.storage.plans` for when the plan is written). The cost metrics are recorded just
         *     after the response is sent, before the connection takes its next request. A `role` the
         *     stored `manifest` has no view for is a 409 `role_not_in_manifest`.
         */
        post: operations["assemble"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/assemblies/{assembly_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get Assembly */
        get: operations["get_assembly"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/assemblies/{assembly_id}/replay": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Replay Assembly */
        post: operations["replay_assembly"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/goal": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /** Put Goal */
        put: operations["put_goal"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/world-state": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /** Put World State */
        put: operations["put_world_state"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/compact": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Compact */
        post: operations["compact"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/compaction-advice": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Compaction Advice */
        get: operations["compaction_advice"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/context-window": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Context Window
         * @description The active context (what session-mode assembly pins and fits) against the window.
         */
        get: operations["context_window"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/end": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * End Session
         * @description Writes a final handoff of the session and fires its `session_end` hook. A `conclusion`
         *     from a session without a parent is a 409 `not_a_child_session`.
         */
        post: operations["end_session"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/delegate": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Delegate
         * @description A child that starts from a brief (goal and the items given), not the parent's history.
         *     Inheriting a world-state section the parent lacks is a 409 `section_not_in_parent`.
         */
        post: operations["delegate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/fork": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Fork
         * @description A child that sees the parent's active history as of now, shared rather than copied.
         *     Inheriting a world-state section the parent lacks is a 409 `section_not_in_parent`.
         */
        post: operations["fork"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/sessions/{session_id}/merge": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Merge
         * @description The only way anything flows from a fork back to its parent: one explicit conclusion.
         *     From a session without a parent, a 409 `not_a_child_session`.
         */
        post: operations["merge"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/manifests/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get Manifest */
        get: operations["get_manifest"];
        /** Put Manifest */
        put: operations["put_manifest"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /** AdviceBody */
        AdviceBody: {
            /** Should Compact */
            should_compact: boolean;
            /** Pressure */
            pressure: number;
            /** Reasons */
            reasons: {
                [key: string]: unknown;
            }[];
            /** Turns Until Full */
            turns_until_full?: number | null;
            /** Recommended Strategy */
            recommended_strategy?: string | null;
            /** @description The compaction priced by the lineage's prompt cache (null: not priced, as for a stateless call). */
            cache?: components["schemas"]["AdviceCacheBody"] | null;
        };
        /**
         * AdviceCacheBody
         * @description What compacting now (to the recommended strategy's product) would save and cost, given
         *     the lineage's prompt cache, in fresh input tokens (a fresh input token costs 1).
         */
        AdviceCacheBody: {
            /**
             * State
             * @description `warm`: the provider still holds the lineage's prefix; `cold`: the lineage's last call came longer ago than the TTL; `empty`: no call yet, or the context is below the provider's minimum cacheable prefix.
             * @enum {string}
             */
            state: "warm" | "cold" | "empty";
            /**
             * Idle Seconds
             * @description Seconds since the lineage's last call (null: it had none).
             */
            idle_seconds: number | null;
            /**
             * Ttl Seconds
             * @description The session's cache TTL (its `cache` terms).
             */
            ttl_seconds: number;
            /**
             * Horizon Calls
             * @description The calls the compaction is priced over: until the compacted context grows back to the high watermark at the recent rate per call.
             */
            horizon_calls: number;
            /**
             * Reduction Tokens
             * @description Tokens the compaction would take off the context.
             */
            reduction_tokens: number;
            /**
             * Saving
             * @description The reduction not sent on those calls: at the read price, or at the write price on the first call when the cache holds nothing.
             */
            saving: number;
            /**
             * Cost
             * @description The cached prefix thrown away: the compacted context written at the write price where it would have been read at the read price (0 when the cache is not warm).
             */
            cost: number;
            /**
             * At Least Tokens
             * @description The least reduction whose saving meets the cost: a compaction that a signal alone advises is not advised below it (null: no reduction does, as when cached tokens cost nothing).
             */
            at_least_tokens: number | null;
        };
        /** AdviceResponse */
        AdviceResponse: {
            /** Should Compact */
            should_compact: boolean;
            /** Pressure */
            pressure: number;
            /** Reasons */
            reasons: {
                [key: string]: unknown;
            }[];
            /** Turns Until Full */
            turns_until_full: number | null;
            /** Recommended Strategy */
            recommended_strategy: string | null;
            /** @description The compaction priced by the lineage's prompt cache. */
            cache: components["schemas"]["AdviceCacheBody"] | null;
            /**
             * Active Tokens
             * @description Exact tokens the pressure weighs: the history without state fragments and the pinned state (goal, its restatement, world state).
             */
            active_tokens: number;
            /**
             * Provider Tokens Estimate
             * @description Estimate (not exact) of the provider's count of a whole request made of the exact tokens beside it: ceil(`tokenizer.overhead_tokens` + tokens × `tokenizer.ratio`), the overhead included.
             */
            provider_tokens_estimate: number;
            tokenizer: components["schemas"]["TokenizerBody"];
        };
        /**
         * AppendMetadata
         * @description Provenance of a batch; unknown keys are kept with the facts.
         */
        AppendMetadata: {
            /**
             * Harness Authored
             * @default false
             */
            harness_authored?: boolean;
            /** Truncation Token Limit */
            truncation_token_limit?: number | null;
        } & {
            [key: string]: unknown;
        };
        /** AppendRequest */
        AppendRequest: {
            /** Items */
            items: {
                [key: string]: unknown;
            }[];
            /**
             * Format
             * @default responses
             * @enum {string}
             */
            format?: "responses" | "chat" | "anthropic";
            /** Expected Last Seq */
            expected_last_seq?: number | null;
            /** Idempotency Key */
            idempotency_key?: string | null;
            /** Unit */
            unit?: string | null;
            /** Phase */
            phase?: string | null;
            metadata?: components["schemas"]["AppendMetadata"];
            /**
             * Malformed
             * @description What becomes of an item of a known type whose fields no provider could take (a message without `role`, a call whose `arguments` are not text): `exclude` appends it, kept in the log and out of every context, and `excluded` says what is wrong; `refuse` answers 422 `malformed_item` naming it, and writes nothing.
             * @default exclude
             * @enum {string}
             */
            malformed?: "exclude" | "refuse";
        };
        /** AppendResponse */
        AppendResponse: {
            /** First Seq */
            first_seq: number;
            /** Last Seq */
            last_seq: number;
            /** Items */
            items: components["schemas"]["AppendedItem"][];
            /**
             * Excluded
             * @description Appended items kept in the log but excluded from model-visible history.
             */
            excluded: components["schemas"]["ExcludedItem"][];
            /**
             * Timeline
             * @description The PostgreSQL timeline that wrote these items (a promoted standby writes on a higher one). Keep it with the seqs: an item that later reads back at one of them with another timeline is not this one (the append was lost in an asynchronous failover and its seq given again). Null on SQLite.
             */
            timeline?: number | null;
        };
        /** AppendedItem */
        AppendedItem: {
            /** Seq */
            seq: number;
            /** Type */
            type: string;
            /** Tokens */
            tokens: number;
        };
        /** AssembleRequest */
        AssembleRequest: {
            /** Session Id */
            session_id?: string | null;
            /** Sources */
            sources?: components["schemas"]["SourceSpec"][];
            budget?: components["schemas"]["BudgetSpec"] | null;
            /**
             * Policy
             * @default balanced
             * @enum {string}
             */
            policy?: "balanced" | "compact" | "expansive";
            /**
             * Placement
             * @default edges
             * @enum {string}
             */
            placement?: "edges" | "input_order";
            /**
             * Min Relevance
             * @default 0
             */
            min_relevance?: number;
            /** Encoding */
            encoding?: ("o200k_base" | "cl100k_base") | null;
            /** Unit */
            unit?: string | null;
            /** Phase */
            phase?: string | null;
            /**
             * Output Format
             * @default responses
             * @enum {string}
             */
            output_format?: "responses" | "chat" | "anthropic";
            /**
             * Input Modalities
             * @default [
             *       "text",
             *       "image"
             *     ]
             */
            input_modalities?: ("text" | "image" | "audio")[];
            /** Manifest */
            manifest?: string | null;
            /** Role */
            role?: string | null;
            /** Environment */
            environment?: string | null;
            /**
             * Recall Tool
             * @description Offer the recall tool in `tools` (session mode); null: the session's setting, on unless the session was created with `recall_tool: false`.
             */
            recall_tool?: boolean | null;
        };
        /**
         * AssembleResponse
         * @description `items` carry each selected candidate (history items in Responses form); `messages` is
         *     the whole selected context converted to the requested `output_format`.
         */
        AssembleResponse: {
            /** Assembly Id */
            assembly_id: string;
            /** Plan Hash */
            plan_hash: string;
            /** Total Tokens */
            total_tokens: number;
            /**
             * Provider Tokens Estimate
             * @description Session mode: estimate (not exact) of the provider's count of the whole request `total_tokens` are sent in, ceil(`tokenizer.overhead_tokens` + total_tokens × `tokenizer.ratio`), the overhead included.
             */
            provider_tokens_estimate?: number | null;
            /**
             * Encoding
             * @description The encoding `total_tokens` and every count here are in.
             */
            encoding?: string | null;
            /** @description Session mode: the session's tokenizer as of this call. */
            tokenizer?: components["schemas"]["TokenizerBody"] | null;
            /**
             * Truncated
             * @description Whether the budget left something out: a candidate dropped for `max_items`, `max_tokens` (of the whole or of its source) or `recall_cap`, or history not shown. Drops for relevance, duplicates, superseded contributions or a missing attribution do not count.
             */
            truncated: boolean;
            /** Over Budget */
            over_budget: boolean;
            /** Items */
            items: components["schemas"]["AssembledItem"][];
            /** Plan */
            plan: components["schemas"]["PlanEntryBody"][];
            /** By Source Class */
            by_source_class: {
                [key: string]: number;
            };
            cache: components["schemas"]["CacheBody"];
            advice: components["schemas"]["AdviceBody"];
            /** @description The effective budget after policy and overrides. */
            budget: components["schemas"]["BudgetSpec"];
            /**
             * Startup Tokens
             * @description Tokens of the required stable prefix.
             */
            startup_tokens: number;
            /**
             * Unit
             * @description Execution unit the tokens are accounted to.
             */
            unit: string | null;
            /**
             * Messages
             * @description Every selected item in position order, in `output_format`, ready to send: text candidates as developer messages, history items as they are. Anthropic: the leading ones are in `system`, later ones are user-turn text blocks.
             */
            messages: {
                [key: string]: unknown;
            }[];
            /**
             * System
             * @description Anthropic output: the top-level `system` text blocks (instructions, rules, the pinned goal, world state). Null for `chat` and `responses`.
             */
            system: {
                [key: string]: unknown;
            }[] | null;
            /**
             * Cache Breakpoints
             * @description Anthropic output: the blocks given `cache_control` (at most four with any the client sent), and why.
             */
            cache_breakpoints: components["schemas"]["CacheBreakpointBody"][];
            /**
             * Prompt Cache Key
             * @description `chat`/`responses` output of a session: a stable key per session and unit to pass as the request's `prompt_cache_key`, so calls of one lineage share a cache.
             */
            prompt_cache_key: string | null;
            conversion: components["schemas"]["ConversionReportBody"];
            /**
             * Tools
             * @description Session mode: the tools contextd defines, in `output_format` (the recall tool, unless `recall_tool` is off), to send beside the runtime's own. Byte-identical on every call of a session.
             */
            tools?: {
                [key: string]: unknown;
            }[];
            /**
             * Elided
             * @description Session mode: every fact of the session's history the context shows reduced or not at all, as seq ranges of one form and reason, in seq order. The visible text names each range's first seq; `POST /sessions/{id}/recall` reads any of them back.
             */
            elided?: components["schemas"]["ElidedEntry"][];
            /**
             * Tools Tokens
             * @description Tokens of `tools` as JSON. They are kept out of the window the context may fill, and counted as pinned by the advice, as far as the session's fitted overhead (`tokenizer.overhead_tokens`, learnt from usage reports that count them) does not hold them already.
             * @default 0
             */
            tools_tokens?: number;
        };
        /** AssembledItem */
        AssembledItem: {
            /** Id */
            id: string;
            /** Source */
            source: string;
            /** Layer */
            layer: string;
            /** Source Class */
            source_class: string;
            /** Form */
            form: string;
            /** Position */
            position: number;
            /** Tokens */
            tokens: number;
            /** Content */
            content?: string | null;
            /** Item */
            item?: {
                [key: string]: unknown;
            } | null;
        };
        /** AssemblyDiffBody */
        AssemblyDiffBody: {
            /** Added */
            added: string[];
            /** Removed */
            removed: string[];
            /** Moved */
            moved: components["schemas"]["MovedItem"][];
            /** Tokens Delta */
            tokens_delta: number;
            /** @description Where and why the replayed context's prompt prefix would break against the original assembly's (as `cache.break` names it between calls); null when the replay reuses the original's whole history. */
            prefix_break?: components["schemas"]["PrefixBreakBody"] | null;
        };
        /** BudgetSpec */
        BudgetSpec: {
            /** Max Items */
            max_items?: number | null;
            /** Max Tokens */
            max_tokens?: number | null;
            /** Max Items Per Source */
            max_items_per_source?: number | null;
            /** Max Tokens Per Source */
            max_tokens_per_source?: number | null;
        };
        /**
         * CacheBody
         * @description The predicted prompt-cache reuse against the previous assembly of the same session and
         *     unit: its leading items, while each is byte-identical to the one at the same position.
         */
        CacheBody: {
            /** Reused Prefix Tokens */
            reused_prefix_tokens: number;
            /** New Tokens */
            new_tokens: number;
            /**
             * Reused Prefix Items
             * @description Leading items reused; also the `position` of the first item not reused.
             */
            reused_prefix_items: number;
            /**
             * Last Reused Item Id
             * @description `id` of the last reused item (at position `reused_prefix_items` - 1); null when nothing is reused.
             */
            last_reused_item_id: string | null;
            /** @description Where and why the reused prefix ended before the previous assembly's history did; null when it did not (or the lineage has no earlier assembly to compare). */
            break?: components["schemas"]["PrefixBreakBody"] | null;
        };
        /** CacheBreakpointBody */
        CacheBreakpointBody: {
            /**
             * Reason
             * @description `stable_prefix`: the end of the system content; `previous_call`: the last block the previous call of this session and unit shares; `history_end`: the end of the history, which the next call is expected to share.
             * @enum {string}
             */
            reason: "stable_prefix" | "previous_call" | "history_end";
            /**
             * Position
             * @description Position of the selected item the breakpoint closes.
             */
            position: number;
            /** Item Id */
            item_id: string;
            /**
             * Message
             * @description Index in `messages`; null: in `system`.
             */
            message: number | null;
            /**
             * Block
             * @description Index of the marked block in that content list.
             */
            block: number;
        };
        /**
         * CacheOptions
         * @description A session's prompt-cache terms where they differ from its model family's
         *     (`docs/prompt-cache.md`): a longer TTL bought, a negotiated price, a model's own minimum.
         */
        CacheOptions: {
            /**
             * Read Price
             * @description A cached input token's price, as a share of a fresh one's.
             */
            read_price?: number | null;
            /**
             * Write Price
             * @description Writing a token into the cache, as a share of fresh input.
             */
            write_price?: number | null;
            /**
             * Ttl Seconds
             * @description How long the provider keeps an entry unused.
             */
            ttl_seconds?: number | null;
            /**
             * Minimum Prefix
             * @description The shortest prefix the provider caches, in its tokens.
             */
            minimum_prefix?: number | null;
            /**
             * Block
             * @description The granularity of a cache hit, in the provider's tokens.
             */
            block?: number | null;
        };
        /**
         * CacheTermsBody
         * @description The prompt-cache terms the session is judged by: its model family's, with its own
         *     `cache` overrides.
         */
        CacheTermsBody: {
            /** Read Price */
            read_price: number;
            /** Write Price */
            write_price: number;
            /** Ttl Seconds */
            ttl_seconds: number;
            /** Minimum Prefix */
            minimum_prefix: number;
            /** Block */
            block: number;
        };
        /**
         * CandidateSpec
         * @description One candidate: `id` and exactly one of `content` and `item` (the schema's `if`);
         *     any other field may be left out. `source_class` defaults to the source's name.
         */
        CandidateSpec: {
            /** Id */
            id: string;
            /** Content */
            content?: string;
            /** Item */
            item?: {
                [key: string]: unknown;
            };
            /**
             * Layer
             * @default memory
             * @enum {string}
             */
            layer?: "prefix" | "task" | "recent" | "memory" | "retrieval";
            /** Source Class */
            source_class?: string | null;
            /**
             * Form
             * @default raw
             * @constant
             */
            form?: "raw";
            /**
             * Forms
             * @default {}
             */
            forms?: {
                [key: string]: string;
            };
            /** Locator */
            locator?: string | null;
            /**
             * Required
             * @default false
             */
            required?: boolean;
            /**
             * Priority
             * @default 0
             */
            priority?: number;
            /**
             * Relevance
             * @default 0
             */
            relevance?: number;
            /**
             * Trust
             * @default 0
             */
            trust?: number;
            /**
             * Freshness
             * @default 0
             */
            freshness?: number;
            /** Tokens */
            tokens?: number | null;
        };
        /** ChildSessionResponse */
        ChildSessionResponse: {
            /** Session Id */
            session_id: string;
            /** Parent Id */
            parent_id: string;
            /**
             * Kind
             * @enum {string}
             */
            kind: "delegate" | "fork";
            /** Inherit */
            inherit: {
                [key: string]: boolean;
            };
            /** Unit */
            unit: string | null;
            /** Fork Seq */
            fork_seq: number | null;
            /** Last Seq */
            last_seq: number;
        };
        /** ClientSummary */
        ClientSummary: {
            /** Text */
            text: string;
        };
        /** CompactParams */
        CompactParams: {
            /**
             * Keep Recent
             * @default 3
             */
            keep_recent?: number;
            /**
             * Clear At Least Tokens
             * @default 0
             */
            clear_at_least_tokens?: number;
            /** Exclude Tools */
            exclude_tools?: string[];
            /**
             * Clear Tool Inputs
             * @default false
             */
            clear_tool_inputs?: boolean;
            /** Target Tokens */
            target_tokens?: number | null;
            /**
             * Summarizer
             * @default builtin
             * @enum {string}
             */
            summarizer?: "builtin" | "llm" | "client";
        };
        /**
         * CompactRequest
         * @description Either `session_id` (writes a compaction fact) or `items` (stateless, writes nothing).
         */
        CompactRequest: {
            /** Session Id */
            session_id?: string | null;
            /** Items */
            items?: {
                [key: string]: unknown;
            }[] | null;
            /**
             * Format
             * @default responses
             * @enum {string}
             */
            format?: "responses" | "chat" | "anthropic";
            /** Output Format */
            output_format?: ("responses" | "chat" | "anthropic") | null;
            /**
             * Strategy
             * @enum {string}
             */
            strategy: "clear_tool_results" | "truncate" | "summary" | "handoff" | "notes";
            params?: components["schemas"]["CompactParams"];
            summary?: components["schemas"]["ClientSummary"] | null;
            /**
             * Goal
             * @description Stateless mode only: the goal to pin (sessions use their own).
             */
            goal?: string | null;
            /**
             * Dry Run
             * @default false
             */
            dry_run?: boolean;
            /** Encoding */
            encoding?: ("o200k_base" | "cl100k_base") | null;
            /**
             * Fallback
             * @description Session mode: when `strategy` finds nothing to do or frees less than `CTX_COMPACTION_MIN_GAIN`, use the strategy the session's advice recommends instead (`strategy` in the answer, `requested_strategy` the one asked for).
             * @default false
             */
            fallback?: boolean;
        } & (unknown & unknown);
        /** CompactResponse */
        CompactResponse: {
            /** Compaction Id */
            compaction_id: string | null;
            /** Strategy */
            strategy: string;
            /** Requested Strategy */
            requested_strategy: string;
            /** Declares */
            declares: {
                [key: string]: string[];
            };
            /** Tokens Before */
            tokens_before: number;
            /** Tokens After */
            tokens_after: number;
            /** Summary */
            summary: {
                [key: string]: unknown;
            } | null;
            /** Notes */
            notes: {
                [key: string]: unknown;
            } | null;
            /** Working Set */
            working_set: components["schemas"]["WorkingSetEntry"][];
            /** History */
            history: {
                [key: string]: unknown;
            }[];
            /**
             * System
             * @description Anthropic output: the history's leading system and developer messages (the re-anchored invariants) as top-level `system` text blocks.
             */
            system: {
                [key: string]: unknown;
            }[] | null;
            conversion: components["schemas"]["ConversionReportBody"];
            loss_check: components["schemas"]["LossCheck"];
            /**
             * Target Tokens
             * @description The target the strategy compacted toward (null: none).
             */
            target_tokens?: number | null;
            /**
             * Over Target Because
             * @description Why `tokens_after` is over `target_tokens`, what each kept part takes; null when it is within.
             */
            over_target_because?: string | null;
            /** @description Null when nothing was compacted. */
            identifiers?: components["schemas"]["CompactedIdentifiers"] | null;
            /**
             * Hooks
             * @description Each hook's outcome: `event`; `outcome` (accepted, vetoed, failed_open, failed_closed, not_configured); `reason`, why a call failed or was not made (refused_destination, deadline, connection_failed, status, answer_too_large, answer_encoded, answer_not_json, not_called; null otherwise); `detail`, the same in words (the kind of refused address and the setting that allows it, the deadline in seconds, the error class of a failed connection, the HTTP status, the answer limit in bytes) or a veto's reason.
             */
            hooks: {
                [key: string]: unknown;
            }[];
            /** Summarization Prompt */
            summarization_prompt?: string | null;
            /** Summarizer */
            summarizer: {
                [key: string]: unknown;
            };
            /** Noop */
            noop: boolean;
            /** Dry Run */
            dry_run: boolean;
            /**
             * Applied
             * @description Whether a compaction fact was written.
             */
            applied: boolean;
            /**
             * Not Applied Because
             * @description Why nothing was written: `dry_run`, `stateless` (items given), `noop` (nothing to compact) or `too_little_gain` (the plan frees less than `CTX_COMPACTION_MIN_GAIN` of the active history).
             */
            not_applied_because: ("dry_run" | "stateless" | "noop" | "too_little_gain") | null;
            /**
             * Recommended Strategy
             * @description When the requested strategy found nothing to do or freed too little: the strategy the session's advice recommends now, which would (null when it is the one requested or none is advised). With `fallback`, it is the one planned.
             */
            recommended_strategy?: string | null;
        };
        /**
         * CompactedIdentifiers
         * @description The file paths, shell commands and error signatures of the range a compaction covered,
         *     and those the new history no longer lets the agent find: not visible, no item showing them
         *     kept verbatim, none replaced by a placeholder naming its fact (recall still reads them).
         */
        CompactedIdentifiers: {
            /** Found */
            found: number;
            /** Kept */
            kept: number;
            /**
             * Lost
             * @description The first 50 lost, in the order found.
             */
            lost: components["schemas"]["LostIdentifier"][];
            /** Lost Total */
            lost_total: number;
        };
        /**
         * CompactionOptions
         * @description A session's compaction watermarks, as shares of its usable window; a field left out takes
         *     the service's setting (`CTX_COMPACTION_HIGH_WATERMARK`, `CTX_COMPACTION_LOW_WATERMARK`).
         */
        CompactionOptions: {
            /**
             * High Watermark
             * @description Pressure at which compaction is advised.
             */
            high_watermark?: number | null;
            /**
             * Low Watermark
             * @description Pressure a compaction brings the context down to.
             */
            low_watermark?: number | null;
        };
        /** ConclusionRequest */
        ConclusionRequest: {
            /** Conclusion */
            conclusion: {
                [key: string]: unknown;
            };
            /**
             * Format
             * @default responses
             * @enum {string}
             */
            format?: "responses" | "chat" | "anthropic";
        };
        /** ConclusionResponse */
        ConclusionResponse: {
            /** Parent Id */
            parent_id: string;
            /** Seq */
            seq: number;
        };
        /**
         * ContextWindowResponse
         * @description The current active context against the session's window.
         */
        ContextWindowResponse: {
            /** Session Id */
            session_id: string;
            /** Context Window */
            context_window: number;
            /**
             * Usable Window
             * @description Provider tokens a session-mode call may fill.
             */
            usable_window: number;
            /**
             * Window Tokens
             * @description The usable window in the session's encoding, beside the overhead: floor((usable_window - overhead_tokens) / ratio), what assembly fits.
             */
            window_tokens: number;
            /**
             * Active Tokens
             * @description Exact tokens of the active context.
             */
            active_tokens: number;
            /**
             * Provider Tokens Estimate
             * @description Estimate (not exact) of the provider's count of a whole request made of the exact tokens beside it: ceil(`tokenizer.overhead_tokens` + tokens × `tokenizer.ratio`), the overhead included.
             */
            provider_tokens_estimate: number;
            /**
             * By Source Class
             * @description `active_tokens` by source class: `history` (without state fragments), `goal` (with its restatement), `world_state`.
             */
            by_source_class: {
                [key: string]: number;
            };
            /**
             * Pressure
             * @description active_tokens / window_tokens, as advice weighs it.
             */
            pressure: number;
            tokenizer: components["schemas"]["TokenizerBody"];
        };
        /**
         * ConversionReportBody
         * @description What the output format could not carry. `index` is the item's position in the
         *     Responses-form list converted (for `/assemble`, its `position`).
         */
        ConversionReportBody: {
            /**
             * Excluded
             * @description Items left out: `{index, type, reason}`, reason `foreign_reasoning` (opaque reasoning of another provider) or `not_expressible`.
             */
            excluded: {
                [key: string]: unknown;
            }[];
            /**
             * Dropped Fields
             * @description Provider fields of items read in another format that this format has no place for (e.g. Anthropic `is_error` written as Chat).
             */
            dropped_fields: components["schemas"]["DroppedFieldBody"][];
            /**
             * Placeholders
             * @description Content replaced by a short text the provider accepts: an empty tool output, an image in a Chat tool output (the image follows in a user message), a part the format cannot carry, or the user turn opening an Anthropic history.
             */
            placeholders: components["schemas"]["PlaceholderBody"][];
        };
        /** CreateSessionRequest */
        CreateSessionRequest: {
            /** Session Id */
            session_id?: string | null;
            /** Encoding */
            encoding?: ("o200k_base" | "cl100k_base") | null;
            /** Context Window */
            context_window?: number | null;
            /** Model */
            model?: string | null;
            /** Metadata */
            metadata?: {
                [key: string]: unknown;
            };
            hooks?: components["schemas"]["SessionHooks"];
            compaction?: components["schemas"]["CompactionOptions"];
            cache?: components["schemas"]["CacheOptions"];
            /**
             * Recall Tool
             * @description Whether session-mode `/assemble` offers the recall tool in `tools` (a request's own `recall_tool` overrides it).
             * @default true
             */
            recall_tool?: boolean;
        };
        /**
         * DelegateRequest
         * @description A delegate starts from a brief, not its parent's history: a goal, and the items given.
         */
        DelegateRequest: {
            /** Session Id */
            session_id?: string | null;
            /** Inherit */
            inherit?: {
                [key: string]: boolean;
            };
            /** Unit */
            unit?: string | null;
            /** Goal */
            goal: string;
            /** Items */
            items?: {
                [key: string]: unknown;
            }[];
            /**
             * Format
             * @default responses
             * @enum {string}
             */
            format?: "responses" | "chat" | "anthropic";
        };
        /** DroppedFieldBody */
        DroppedFieldBody: {
            /** Index */
            index: number;
            /**
             * Field
             * @description Path of the provider field, e.g. `is_error`.
             */
            field: string;
        };
        /** ElidedEntry */
        ElidedEntry: {
            /** First Seq */
            first_seq: number;
            /** Last Seq */
            last_seq: number;
            /**
             * Form
             * @description cleared (a placeholder), truncated (head and tail), summarized or externalized (a compaction record stands for it), dropped (not shown: a compaction or the window left it out), excluded (normalization left it out).
             * @enum {string}
             */
            form: "cleared" | "truncated" | "summarized" | "externalized" | "dropped" | "excluded";
            /**
             * Tokens Full
             * @description Stored tokens of the facts in the range.
             */
            tokens_full: number;
            /**
             * Tokens Shown
             * @description Tokens the context spends on them: their reduced items, or the record that stands for them (a record standing for several ranges counts in each).
             */
            tokens_shown: number;
            /**
             * Reason
             * @description `compaction <id>`, a plan drop reason (`max_tokens`, `history_cut`), `truncation policy`, or `normalization: <reason>`.
             */
            reason: string;
        };
        /** EndSessionRequest */
        EndSessionRequest: {
            /**
             * Conclusion
             * @description For a child session: the one item appended to its parent.
             */
            conclusion?: {
                [key: string]: unknown;
            } | null;
            /**
             * Format
             * @default responses
             * @enum {string}
             */
            format?: "responses" | "chat" | "anthropic";
        };
        /** EndSessionResponse */
        EndSessionResponse: {
            /** Compaction Id */
            compaction_id: string | null;
            /**
             * Hooks
             * @description Each hook's outcome: `event`; `outcome` (accepted, vetoed, failed_open, failed_closed, not_configured); `reason`, why a call failed or was not made (refused_destination, deadline, connection_failed, status, answer_too_large, answer_encoded, answer_not_json, not_called; null otherwise); `detail`, the same in words (the kind of refused address and the setting that allows it, the deadline in seconds, the error class of a failed connection, the HTTP status, the answer limit in bytes) or a veto's reason.
             */
            hooks: {
                [key: string]: unknown;
            }[];
            /** Conclusion Seq */
            conclusion_seq?: number | null;
        };
        /** ErrorBody */
        ErrorBody: {
            /** Code */
            code: string;
            /** Message */
            message: string;
            /** Details */
            details?: unknown;
        };
        /** ErrorResponse */
        ErrorResponse: {
            error: components["schemas"]["ErrorBody"];
        };
        /** EvaluateRequest */
        EvaluateRequest: {
            /** Variants */
            variants?: components["schemas"]["EvaluateVariant"][];
        };
        /** EvaluateResponse */
        EvaluateResponse: {
            /** Session Id */
            session_id: string;
            /**
             * Last Seq
             * @description The log was replayed up to this seq.
             */
            last_seq: number;
            /**
             * Calls
             * @description Model calls in the log: where a run of model output starts.
             */
            calls: number;
            /**
             * Variants
             * @description `current` first, then the request's.
             */
            variants: components["schemas"]["VariantResult"][];
        };
        /**
         * EvaluateVariant
         * @description One way to run the session. Every field but `name` left out is the session's own.
         */
        EvaluateVariant: {
            /** Name */
            name: string;
            /** Context Window */
            context_window?: number | null;
            /**
             * Strategy
             * @description The strategy every advised compaction uses; left out, the one the advice recommends.
             */
            strategy?: ("clear_tool_results" | "truncate" | "summary" | "handoff" | "notes") | null;
            watermarks?: components["schemas"]["EvaluateWatermarks"] | null;
            /**
             * Keep Recent
             * @description Each compaction's `keep_recent`.
             */
            keep_recent?: number | null;
            /**
             * Follow Advice
             * @description false: the runtime never compacts (the window's fitting does all the work).
             * @default true
             */
            follow_advice?: boolean;
            /** Recall Tool */
            recall_tool?: boolean | null;
            /**
             * Summarizer
             * @description `client`: each product record's summary is the narrative the log recorded where the session compacted with a summarizer of its own (the newest before the replayed compaction, each used once), else the built-in one. The replay calls no summarizer.
             * @default builtin
             * @enum {string}
             */
            summarizer?: "builtin" | "client";
            /** @description Prompt-cache terms to tell the service, over the session's own: its advice prices the cache by them. The simulated provider keeps the session's terms, so a variant that tells the service no cache discount (`read_price` 1) shows what advice blind to the cache would cost. */
            cache?: components["schemas"]["CacheOptions"] | null;
        };
        /**
         * EvaluateWatermarks
         * @description Compaction watermarks, as shares of the usable window; one left out is the session's.
         */
        EvaluateWatermarks: {
            /** High */
            high?: number | null;
            /** Low */
            low?: number | null;
        };
        /**
         * EvaluationGrounding
         * @description Of the identifiers each call's own output went on to use that the history before it
         *     held (the goal's left out): how many the context showed, how many only an elided fact
         *     held (one recall away), and how many it held nowhere.
         */
        EvaluationGrounding: {
            /**
             * Calls Needing
             * @description Calls whose output used any such identifier.
             */
            calls_needing: number;
            /** Needed */
            needed: number;
            /** Visible */
            visible: number;
            /** Recallable */
            recallable: number;
            /** Missed */
            missed: number;
            /** Visible Share */
            visible_share: number;
            /**
             * All Visible Calls
             * @description Share of `calls_needing` that saw them all.
             */
            all_visible_calls: number;
            /**
             * Calls Seeing All
             * @description Of `calls_needing`, those that saw them all.
             */
            calls_seeing_all: number;
            /**
             * Misses By Form
             * @description The recallable ones, by the form of the `elided` entry holding them (`summarized`, `cleared`, `dropped`, `truncated`, ...).
             */
            misses_by_form: {
                [key: string]: number;
            };
            /**
             * Calls Hiding
             * @description Calls whose context elided anything.
             */
            calls_hiding: number;
            /**
             * Calls Naming Every Seq
             * @description Of `calls_hiding`, those whose visible text names every elided entry's first seq (what a recall starts from).
             */
            calls_naming_every_seq: number;
            /**
             * Recall Checked
             * @description Recallable identifiers searched for with `/recall` over their entry's range.
             */
            recall_checked: number;
            /**
             * Recall Confirmed
             * @description Of those, the ones the search handed back.
             */
            recall_confirmed: number;
            graded: components["schemas"]["GradedGrounding"];
        };
        /**
         * EvaluationJobResponse
         * @description An evaluation run as a job: `GET /evaluations/{id}` while it runs, and after.
         */
        EvaluationJobResponse: {
            /** Evaluation Id */
            evaluation_id: string;
            /** Session Id */
            session_id: string;
            /**
             * Status
             * @enum {string}
             */
            status: "running" | "done" | "failed" | "cancelled";
            progress: components["schemas"]["EvaluationProgress"];
            /** @description The evaluation, once `done`. */
            result: components["schemas"]["EvaluateResponse"] | null;
            /**
             * Error
             * @description Why it `failed`: the replay's error, the service stopping, or the job lost with its process (a restart).
             */
            error: string | null;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /**
             * Updated At
             * Format: date-time
             * @description When its runner last wrote its progress.
             */
            updated_at: string;
        };
        /** EvaluationProgress */
        EvaluationProgress: {
            /** Calls Done */
            calls_done: number;
            /**
             * Calls Total
             * @description The calls the replay makes over all its variants.
             */
            calls_total: number;
        };
        /** ExcludedItem */
        ExcludedItem: {
            /** Seq */
            seq: number;
            /** Type */
            type: string;
            /** Reason */
            reason: string;
            /**
             * Detail
             * @description For a `malformed` item, what is wrong with it, in words (`message without role`, `function_call arguments is an object, not text`); null for the other reasons.
             */
            detail?: string | null;
        };
        /**
         * ForkRequest
         * @description A fork sees its parent's active history as of now: it is given no brief.
         */
        ForkRequest: {
            /** Session Id */
            session_id?: string | null;
            /** Inherit */
            inherit?: {
                [key: string]: boolean;
            };
            /** Unit */
            unit?: string | null;
        };
        /** GoalRequest */
        GoalRequest: {
            /** Text */
            text: string;
        };
        /** GoalResponse */
        GoalResponse: {
            /** Version */
            version: number;
            /** Seq */
            seq: number;
        };
        /**
         * GradedGrounding
         * @description The same measure as the service took it itself, grading each call when its output was
         *     appended (an assembly's `grounding`).
         */
        GradedGrounding: {
            /** Calls Needing */
            calls_needing: number;
            /** Needed */
            needed: number;
            /** Visible */
            visible: number;
            /** Calls Seeing All */
            calls_seeing_all: number;
        };
        /** HealthResponse */
        HealthResponse: {
            /** Status */
            status: string;
        };
        /** HistoryResponse */
        HistoryResponse: {
            /** Items */
            items: {
                [key: string]: unknown;
            }[];
            /**
             * System
             * @description Anthropic output: the leading system and developer messages as the top-level `system` text blocks to send. Null for `chat` and `responses`, which keep them as messages.
             */
            system: {
                [key: string]: unknown;
            }[] | null;
            /**
             * Tokens
             * @description Exact tokens of the returned items' model-visible text.
             */
            tokens: number;
            report: components["schemas"]["NormalizeReportBody"];
            /**
             * Untranslated
             * @description Indices of normalized Responses-form items the output format cannot carry; they are left out and listed in `report.excluded`.
             */
            untranslated: number[];
            /** Compaction Id */
            compaction_id: string | null;
        };
        /** ItemsPageResponse */
        ItemsPageResponse: {
            /** Items */
            items: components["schemas"]["LoggedItem"][];
            /** Next After Seq */
            next_after_seq: number | null;
        };
        /** LoggedItem */
        LoggedItem: {
            /** Seq */
            seq: number;
            /** Item */
            item: {
                [key: string]: unknown;
            };
            /** Type */
            type: string;
            /**
             * Recorded At
             * Format: date-time
             */
            recorded_at: string;
            /** Unit */
            unit: string | null;
            /** Phase */
            phase: string | null;
            /** Tokens */
            tokens: number;
            /** Metadata */
            metadata: {
                [key: string]: unknown;
            };
            /**
             * Original
             * @description For an item appended as `chat` or `anthropic`: on the first item a message became, `{format, message, parts}` with the message exactly as sent; on the others, `{format, part, message_seq}`. Null for items appended as `responses` (`item` is exactly as sent).
             */
            original: {
                [key: string]: unknown;
            } | null;
            /**
             * Timeline
             * @description The PostgreSQL timeline that wrote the item (see the append's `timeline`). Null on SQLite and for items written before timelines were recorded.
             */
            timeline: number | null;
        };
        /** LossCheck */
        LossCheck: {
            /** Missing */
            missing: string[];
            /** Fell Back */
            fell_back: boolean;
        };
        /** LostIdentifier */
        LostIdentifier: {
            /**
             * Kind
             * @enum {string}
             */
            kind: "path" | "command" | "error";
            /** Text */
            text: string;
            /**
             * Seqs
             * @description The covered facts that show it, where recall finds it.
             */
            seqs: number[];
        };
        /** ManifestEntrySpec */
        ManifestEntrySpec: {
            /** Id */
            id: string;
            /**
             * Kind
             * @default rule
             * @enum {string}
             */
            kind?: "rule" | "source";
            /** Content */
            content: string;
            /** Index */
            index?: string | null;
            /** Locator */
            locator?: string | null;
            /** Links */
            links?: string[];
            /** Environments */
            environments?: string[];
        };
        /** ManifestRequest */
        ManifestRequest: {
            /** Entries */
            entries: components["schemas"]["ManifestEntrySpec"][];
            /** Roles */
            roles?: {
                [key: string]: components["schemas"]["RoleViewSpec"];
            };
            /** Priorities */
            priorities?: string[];
        };
        /** ManifestResponse */
        ManifestResponse: {
            /** Entries */
            entries: components["schemas"]["ManifestEntrySpec"][];
            /** Roles */
            roles?: {
                [key: string]: components["schemas"]["RoleViewSpec"];
            };
            /** Priorities */
            priorities?: string[];
            /** Name */
            name: string;
            /** Version */
            version: number;
        };
        /** ManifestVersionResponse */
        ManifestVersionResponse: {
            /** Name */
            name: string;
            /** Version */
            version: number;
        };
        /** MovedItem */
        MovedItem: {
            /** Id */
            id: string;
            /** From */
            from: number;
            /** To */
            to: number;
        };
        /**
         * NextActionGrounding
         * @description How the assembly served the next action its model took: the identifiers (paths, names,
         *     ids, codes) of the model output appended after it that the history before the call held.
         */
        NextActionGrounding: {
            /**
             * Needed
             * @description Identifiers of the output that the history held.
             */
            needed: number;
            /**
             * Visible
             * @description Of those, the ones in what the assembly sent.
             */
            visible: number;
            /**
             * Recallable
             * @description Not visible, but in a fact the assembly listed as elided: one recall away.
             */
            recallable: number;
            /**
             * Neither
             * @description Neither visible nor in an elided fact.
             */
            neither: number;
            /** All Visible */
            all_visible: boolean;
            /**
             * Misses By Form
             * @description Identifiers not visible, by the form of the elided facts that held them (`cleared`, `truncated`, `summarized`, `externalized`, `dropped`, `excluded`; `absent` when no elided fact did).
             */
            misses_by_form: {
                [key: string]: number;
            };
            /**
             * Missed
             * @description The first 20 identifiers not visible, sorted.
             */
            missed: string[];
            /**
             * Ungraded
             * @description Identifiers of the output left ungraded: an output naming more than 5,000 is graded on the first 5,000, sorted.
             * @default 0
             */
            ungraded?: number;
        };
        /** NormalizeReportBody */
        NormalizeReportBody: {
            /** Synthesized Outputs */
            synthesized_outputs: {
                [key: string]: unknown;
            }[];
            /** Removed Orphans */
            removed_orphans: {
                [key: string]: unknown;
            }[];
            /** Reordered Outputs */
            reordered_outputs: {
                [key: string]: unknown;
            }[];
            /** Deduplicated Outputs */
            deduplicated_outputs: {
                [key: string]: unknown;
            }[];
            /** Stripped Media */
            stripped_media: {
                [key: string]: unknown;
            }[];
            /** Truncated Outputs */
            truncated_outputs: {
                [key: string]: unknown;
            }[];
            /**
             * Excluded
             * @description Items kept out: by admission (`index` in the input) and by the output format (`foreign_reasoning`, `not_expressible`: `index` in the normalized list).
             */
            excluded: {
                [key: string]: unknown;
            }[];
            /** Dropped Fields */
            dropped_fields: components["schemas"]["DroppedFieldBody"][];
            /** Placeholders */
            placeholders: components["schemas"]["PlaceholderBody"][];
        };
        /**
         * NormalizeRequest
         * @description Either `items` (stateless) or `session_id` (that session's active history).
         */
        NormalizeRequest: {
            /** Items */
            items?: {
                [key: string]: unknown;
            }[] | null;
            /** Session Id */
            session_id?: string | null;
            /**
             * Format
             * @default responses
             * @enum {string}
             */
            format?: "responses" | "chat" | "anthropic";
            /** Output Format */
            output_format?: ("responses" | "chat" | "anthropic") | null;
            /**
             * Input Modalities
             * @default [
             *       "text",
             *       "image"
             *     ]
             */
            input_modalities?: ("text" | "image" | "audio")[];
            truncation?: components["schemas"]["TruncationSpec"];
            /** Encoding */
            encoding?: ("o200k_base" | "cl100k_base") | null;
        };
        /** NormalizeResponse */
        NormalizeResponse: {
            /** Items */
            items: {
                [key: string]: unknown;
            }[];
            /**
             * System
             * @description Anthropic output: the leading system and developer messages as the top-level `system` text blocks to send. Null for `chat` and `responses`, which keep them as messages.
             */
            system: {
                [key: string]: unknown;
            }[] | null;
            /**
             * Tokens
             * @description Exact tokens of the returned items' model-visible text.
             */
            tokens: number;
            report: components["schemas"]["NormalizeReportBody"];
            /**
             * Untranslated
             * @description Indices of normalized Responses-form items the output format cannot carry; they are left out and listed in `report.excluded`.
             */
            untranslated: number[];
        };
        /** PlaceholderBody */
        PlaceholderBody: {
            /** Index */
            index: number;
            /**
             * Kind
             * @enum {string}
             */
            kind: "empty_output" | "tool_output_image" | "unsupported_part" | "leading_user_turn";
        };
        /**
         * PlanEntryBody
         * @description What became of one candidate or history entry. The history entries an assembly leaves
         *     out are planned as runs, one per reason: `history:<first>-<last>` (a run of one is named as
         *     its entry, `history:<n>`), with their tokens summed; `elided` names their facts by seq.
         */
        PlanEntryBody: {
            /** Id */
            id: string;
            /** Source */
            source: string;
            /** Layer */
            layer: string;
            /** Source Class */
            source_class: string;
            /**
             * Decision
             * @enum {string}
             */
            decision: "selected" | "dropped";
            /** Reason */
            reason: string | null;
            /** Form */
            form: string;
            /** Tokens */
            tokens: number;
            /** Score */
            score: number | null;
            /** Position */
            position: number | null;
        };
        /**
         * PrefixBreakBody
         * @description Where a reused prefix broke, and the one cause (`docs/prompt-cache.md`).
         */
        PrefixBreakBody: {
            /**
             * Position
             * @description The first position not reused.
             */
            position: number;
            /**
             * Item Id
             * @description The item now at that position (null: none).
             */
            item_id: string | null;
            /**
             * Seq
             * @description The fact seq that item stands for (null: none).
             */
            seq: number | null;
            /**
             * Cause
             * @enum {string}
             */
            cause: "compaction" | "world_state" | "goal" | "excluded" | "retracted" | "window_cut" | "tools" | "output_format" | "notice" | "override";
            /**
             * Detail
             * @description What changed, in words, with the seqs or versions.
             */
            detail: string;
        };
        /** PrefixFigures */
        PrefixFigures: {
            /**
             * Left History Calls
             * @description Calls whose messages left the previous call's before the end of its history: a prefix the provider's cache could not serve whole.
             */
            left_history_calls: number;
            /**
             * Named Breaks
             * @description The prefix breaks the service named (`cache.break`), by cause.
             */
            named_breaks: {
                [key: string]: number;
            };
        };
        /**
         * ProviderCacheFigures
         * @description The simulated provider against the service's own prediction of each call.
         */
        ProviderCacheFigures: {
            /**
             * Expired Calls
             * @description Calls an expired entry would have served more, had it not expired.
             */
            expired_calls: number;
            /**
             * Predicted Unexpired Tokens
             * @description The service's predicted reused prefix over the calls without expiry, under the provider's minimum prefix and blocks.
             */
            predicted_unexpired_tokens: number;
            /**
             * Cached Unexpired Tokens
             * @description What the provider served of those calls.
             */
            cached_unexpired_tokens: number;
            /**
             * Misses
             * @description Calls the provider served less than the service predicted.
             */
            misses: number;
            /**
             * Misses By Class
             * @description The class the service gave each miss when its usage was reported (`cache_outcome`).
             */
            misses_by_class: {
                [key: string]: number;
            };
            /** Unclassified Misses */
            unclassified_misses: number;
        };
        /** RecallMatchBody */
        RecallMatchBody: {
            /** Seq */
            seq: number;
            /**
             * Line
             * @description Line number in the fact's text, counted from 1.
             */
            line: number;
            /**
             * Text
             * @description The matching line, or an excerpt around the match.
             */
            text: string;
        };
        /**
         * RecallRequest
         * @description One fact in a window (`seq`), or a search (`pattern`) of one fact or a seq range. The
         *     schema states which fields go together; `from_seq` after `to_seq` it cannot.
         */
        RecallRequest: {
            /**
             * Seq
             * @description The fact to read (or to search).
             */
            seq?: number | null;
            /**
             * From Line
             * @description First line of the window, counted from 1; for a search, the line of its first fact it starts at (a stopped search's `next_from_line`).
             * @default 1
             */
            from_line?: number;
            /**
             * From Char
             * @description Where in `from_line` the window starts: 0 unless paging through a line longer than `max_tokens` (the previous answer's `next_from_char`).
             * @default 0
             */
            from_char?: number;
            /**
             * Max Lines
             * @description Lines in the window, capped by the service.
             * @default 200
             */
            max_lines?: number;
            /**
             * Max Tokens
             * @description Tokens in the window (exact, session encoding), capped by the service.
             * @default 2000
             */
            max_tokens?: number;
            /**
             * Pattern
             * @description An RE2 regular expression (no backreferences or lookaround); `^` and `$` match at line ends. With it, the answer lists matching lines instead of a window.
             */
            pattern?: string | null;
            /**
             * From Seq
             * @description First fact a search covers.
             */
            from_seq?: number | null;
            /**
             * To Seq
             * @description Last fact a search covers.
             */
            to_seq?: number | null;
            /**
             * Max Matches
             * @description Matching lines listed, capped by the service.
             * @default 50
             */
            max_matches?: number;
        };
        /** RecallResponse */
        RecallResponse: {
            /**
             * Seq
             * @description The fact read or searched; null for a range search.
             */
            seq: number | null;
            /**
             * Type
             * @description That fact's type.
             */
            type: string | null;
            /**
             * Text
             * @description The window: the fact's text exactly as logged, whole lines; null for a search.
             */
            text: string | null;
            /** From Line */
            from_line: number | null;
            /** From Char */
            from_char: number | null;
            /** To Line */
            to_line: number | null;
            /** Total Lines */
            total_lines: number | null;
            /**
             * Tokens
             * @description Exact tokens of `text` in the session's encoding.
             */
            tokens: number | null;
            /**
             * Next From Line
             * @description Where the next window starts, or the line of `next_from_seq` a stopped search goes on from; null at the end.
             */
            next_from_line: number | null;
            /** Next From Char */
            next_from_char: number | null;
            /** Matches */
            matches: components["schemas"]["RecallMatchBody"][];
            /**
             * From Seq
             * @description First fact the search covered.
             */
            from_seq: number | null;
            /**
             * To Seq
             * @description Last fact the search covered.
             */
            to_seq: number | null;
            /**
             * Next From Seq
             * @description Where a search stopped by a bound goes on (null: it covered the range).
             */
            next_from_seq: number | null;
            /**
             * Stopped By
             * @description The bound that stopped a search early: `max_matches`, `max_scan_bytes` (the bytes given to the pattern, a byte searched twice counting twice) or `max_scan_seconds` (the CPU time it may take; a pattern RE2 can only run on its slower engine meets it first); null when it covered the range, and for a window.
             */
            stopped_by?: ("max_matches" | "max_scan_bytes" | "max_scan_seconds") | null;
            /**
             * Scanned Bytes
             * @description The bytes a search gave its pattern; null for a window.
             */
            scanned_bytes?: number | null;
            /**
             * Max Scan Bytes
             * @description The byte bound a search ran under; null for a window.
             */
            max_scan_bytes?: number | null;
            /**
             * Max Scan Seconds
             * @description The CPU bound a search ran under; null for a window.
             */
            max_scan_seconds?: number | null;
            /**
             * Max Lines
             * @description The line bound applied (the request's, capped).
             */
            max_lines: number;
            /**
             * Max Tokens
             * @description The token bound applied (the request's, capped).
             */
            max_tokens: number;
            /**
             * Max Matches
             * @description The match bound applied (the request's, capped).
             */
            max_matches: number;
            /**
             * Tool Output
             * @description The answer as the recall tool's output for the model: a header line naming the fact(s) and where to go on, then the window or the matching lines.
             */
            tool_output: string;
        };
        /** ReplayOverrides */
        ReplayOverrides: {
            budget?: components["schemas"]["BudgetSpec"] | null;
            /** Policy */
            policy?: ("balanced" | "compact" | "expansive") | null;
            /** Placement */
            placement?: ("edges" | "input_order") | null;
            /** Min Relevance */
            min_relevance?: number | null;
            /** Drop Sources */
            drop_sources?: string[];
            /** Replace Sources */
            replace_sources?: components["schemas"]["SourceSpec"][];
        };
        /** ReplayRequest */
        ReplayRequest: {
            overrides?: components["schemas"]["ReplayOverrides"];
        };
        /** ReplayResponse */
        ReplayResponse: {
            assembly: components["schemas"]["AssembleResponse"];
            diff: components["schemas"]["AssemblyDiffBody"];
        };
        /** ResetResponse */
        ResetResponse: {
            /**
             * Seq
             * @description The reset fact's seq; the active history starts after it.
             */
            seq: number;
        };
        /** RetractedItem */
        RetractedItem: {
            /** Seq */
            seq: number;
            /**
             * Item
             * @description The hidden item as the log holds it.
             */
            item: {
                [key: string]: unknown;
            };
        };
        /** RetractionRequest */
        RetractionRequest: {
            /**
             * Seq
             * @description The item to hide; left out (or null), the newest item the active history shows.
             */
            seq?: number | null;
        };
        /** RetractionResponse */
        RetractionResponse: {
            /**
             * Seq
             * @description The retraction fact's own seq.
             */
            seq: number;
            /**
             * Retracted
             * @description Every seq hidden: the one asked for, and the call or outputs paired with it.
             */
            retracted: number[];
            /**
             * Items
             * @description The hidden items, in seq order, as the log holds them (Responses form).
             */
            items: components["schemas"]["RetractedItem"][];
        };
        /** RoleViewSpec */
        RoleViewSpec: {
            /** Include */
            include?: string[] | null;
            /** Exclude */
            exclude?: string[];
        };
        /** SessionDetailResponse */
        SessionDetailResponse: {
            /** Session Id */
            session_id: string;
            /** Encoding */
            encoding: string;
            /** Context Window */
            context_window: number;
            /**
             * Usable Window
             * @description Provider tokens a session-mode call may fill (the window less the output reserve): assembly fits, and advice weighs against, floor((usable_window - overhead_tokens) / ratio) exact tokens.
             */
            usable_window: number;
            /** Model */
            model: string | null;
            /** Metadata */
            metadata: {
                [key: string]: unknown;
            };
            hooks: components["schemas"]["SessionHooks"];
            compaction: components["schemas"]["CompactionOptions"];
            cache: components["schemas"]["CacheTermsBody"];
            /**
             * Recall Tool
             * @description Whether assemblies offer the recall tool.
             */
            recall_tool: boolean;
            tokenizer: components["schemas"]["TokenizerBody"];
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Last Seq */
            last_seq: number;
            /** Item Count */
            item_count: number;
            /** Active Tokens */
            active_tokens: number;
            /**
             * Provider Tokens Estimate
             * @description Estimate (not exact) of the provider's count of a whole request made of the exact tokens beside it: ceil(`tokenizer.overhead_tokens` + tokens × `tokenizer.ratio`), the overhead included.
             */
            provider_tokens_estimate: number;
            /** Goal */
            goal: {
                [key: string]: unknown;
            } | null;
            /** World State Version */
            world_state_version: number;
            /** Compactions */
            compactions: number;
        };
        /** SessionHooks */
        SessionHooks: {
            /** Pre Compact */
            pre_compact?: string | null;
            /** Session End */
            session_end?: string | null;
            /**
             * Failure Policy
             * @description What a hook timeout or error means for the compaction.
             * @default fail_open
             * @enum {string}
             */
            failure_policy?: "fail_open" | "fail_closed";
        };
        /** SessionResponse */
        SessionResponse: {
            /** Session Id */
            session_id: string;
            /** Encoding */
            encoding: string;
            /** Context Window */
            context_window: number;
            /**
             * Usable Window
             * @description Provider tokens a session-mode call may fill (the window less the output reserve): assembly fits, and advice weighs against, floor((usable_window - overhead_tokens) / ratio) exact tokens.
             */
            usable_window: number;
            /** Model */
            model: string | null;
            /** Metadata */
            metadata: {
                [key: string]: unknown;
            };
            hooks: components["schemas"]["SessionHooks"];
            compaction: components["schemas"]["CompactionOptions"];
            cache: components["schemas"]["CacheTermsBody"];
            /**
             * Recall Tool
             * @description Whether assemblies offer the recall tool.
             */
            recall_tool: boolean;
            tokenizer: components["schemas"]["TokenizerBody"];
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Last Seq */
            last_seq: number;
        };
        /** SourceSpec */
        SourceSpec: {
            /** Source */
            source: string;
            /** Items */
            items: components["schemas"]["CandidateSpec"][];
        };
        /** StoredAssemblyResponse */
        StoredAssemblyResponse: {
            /** Assembly Id */
            assembly_id: string;
            /**
             * Created At
             * Format: date-time
             */
            created_at: string;
            /** Session Id */
            session_id: string | null;
            /** Request */
            request: {
                [key: string]: unknown;
            };
            response: components["schemas"]["AssembleResponse"];
            /** @description Session mode: how the assembly served its model's next action, graded when that output was appended (the first model output after it, in the same unit); null until then. */
            grounding?: components["schemas"]["NextActionGrounding"] | null;
            /**
             * Cache Outcome
             * @description The provider's prompt-cache outcome against `cache.reused_prefix_tokens`, classified when a usage report named this assembly (the latest report's): `as_predicted`, `below_minimum`, `expired` (idle past the TTL), `evicted` (within it), `more_than_predicted`; null until then.
             */
            cache_outcome?: ("as_predicted" | "below_minimum" | "expired" | "evicted" | "more_than_predicted") | null;
        };
        /**
         * TokenizerBody
         * @description How the session's provider counts against the session's encoding: every window is in
         *     provider tokens, every exact count in the encoding, and a whole request is estimated as
         *     `overhead_tokens` + `ratio` × its exact tokens.
         */
        TokenizerBody: {
            /**
             * Family
             * @description Tokenizer family, from the session's `model`.
             * @enum {string}
             */
            family: "openai" | "anthropic" | "google" | "other";
            /**
             * Ratio
             * @description Provider tokens per encoding token: the family's default until usage reports naming their assembly, spread over enough sizes, identify it.
             */
            ratio: number;
            /**
             * Overhead Tokens
             * @description Provider tokens every request has beyond what contextd assembled (tool definitions, system prompt framing, per-message formatting), fitted from usage reports; 0 until they show one. At most half of `usable_window`.
             */
            overhead_tokens: number;
            /**
             * Calibrated
             * @description Whether any usage report has calibrated the session.
             */
            calibrated: boolean;
            /**
             * Samples
             * @description Usage reports that calibrated the session.
             */
            samples: number;
            /**
             * Exact
             * @description An OpenAI model counted in its own encoding: `ratio` is 1, always (`overhead_tokens` is still fitted).
             */
            exact: boolean;
        };
        /** TruncationSpec */
        TruncationSpec: {
            /**
             * Mode
             * @default tokens
             * @enum {string}
             */
            mode?: "tokens" | "bytes";
            /**
             * Limit
             * @default 10000
             */
            limit?: number;
            /**
             * Serialization Margin
             * @default 1.2
             */
            serialization_margin?: number;
        };
        /** UsageRequest */
        UsageRequest: {
            /**
             * Input Tokens
             * @default 0
             */
            input_tokens?: number;
            /**
             * Cached Tokens
             * @default 0
             */
            cached_tokens?: number;
            /**
             * Output Tokens
             * @default 0
             */
            output_tokens?: number;
            /** Unit */
            unit?: string | null;
            /** Phase */
            phase?: string | null;
            /** Assembly Id */
            assembly_id?: string | null;
        };
        /** VariantResult */
        VariantResult: {
            /** Name */
            name: string;
            settings: components["schemas"]["VariantSettings"];
            /** Calls */
            calls: number;
            /** Input Tokens */
            input_tokens: number;
            /**
             * Reused Tokens
             * @description Tokens of the leading messages identical to the previous call's.
             */
            reused_tokens: number;
            /** Reuse */
            reuse: number;
            /** Fresh Tokens */
            fresh_tokens: number;
            /**
             * Cached Tokens
             * @description What a simulated provider cache served.
             */
            cached_tokens: number;
            /**
             * Written Tokens
             * @description What it wrote into its cache.
             */
            written_tokens: number;
            /**
             * Cost
             * @description In fresh input tokens, in the session's cache terms: uncached input at 1, cached at the read price, the write premium on what is written.
             */
            cost: number;
            /** Compactions */
            compactions: number;
            /** Compactions Per 100 */
            compactions_per_100: number;
            /**
             * Recorded Summaries
             * @description Compactions whose record used the summary the log recorded (`client`).
             */
            recorded_summaries: number;
            /** Peak Tokens */
            peak_tokens: number;
            /**
             * Goal Calls
             * @description Calls with a goal to keep.
             */
            goal_calls: number;
            /**
             * Goal Kept
             * @description Share of `goal_calls` showing the goal (null: none).
             */
            goal_kept: number | null;
            /** Goal Kept Calls */
            goal_kept_calls: number;
            /**
             * Pairing Kept
             * @description Share of calls whose tool calls and outputs pair.
             */
            pairing_kept: number;
            /** Pairing Kept Calls */
            pairing_kept_calls: number;
            /** Over Budget Calls */
            over_budget_calls: number;
            grounding: components["schemas"]["EvaluationGrounding"];
            /**
             * Predicted Reused Tokens
             * @description The reused prefix the service predicted (`cache.reused_prefix_tokens`), summed.
             */
            predicted_reused_tokens: number;
            /**
             * Restated Tokens
             * @description Tokens of the goal's restatement at the end, summed.
             */
            restated_tokens: number;
            /**
             * History Cut Calls
             * @description Calls whose assembly had to cut the history: its oldest items left the context without a compaction's record of them.
             */
            history_cut_calls: number;
            prefix: components["schemas"]["PrefixFigures"];
            provider_cache: components["schemas"]["ProviderCacheFigures"];
        };
        /**
         * VariantSettings
         * @description What a variant ran with, every setting resolved.
         */
        VariantSettings: {
            /** Context Window */
            context_window: number;
            /**
             * Strategy
             * @description null: the advice's recommendation.
             */
            strategy: ("clear_tool_results" | "truncate" | "summary" | "handoff" | "notes") | null;
            /** High Watermark */
            high_watermark: number;
            /** Low Watermark */
            low_watermark: number;
            /** Keep Recent */
            keep_recent: number;
            /** Follow Advice */
            follow_advice: boolean;
            /** Recall Tool */
            recall_tool: boolean;
            /**
             * Cache
             * @description The session's `cache` terms the service was told.
             */
            cache: {
                [key: string]: number;
            };
            /**
             * Summarizer
             * @enum {string}
             */
            summarizer: "builtin" | "client";
        };
        /** WorkingSetEntry */
        WorkingSetEntry: {
            /** Seq */
            seq: number;
            /** Reason */
            reason: string;
        };
        /** WorldStateRequest */
        WorldStateRequest: {
            /**
             * Sections
             * @description The whole current world state, by section id; a section left out is removed. A null member of an object means absent (as in a merge patch), except inside an array, which is kept whole.
             */
            sections: {
                [key: string]: unknown;
            };
        };
        /** WorldStateResponse */
        WorldStateResponse: {
            /** Version */
            version: number;
            /** Updates */
            updates: {
                [key: string]: unknown;
            }[];
            /** Changes */
            changes: {
                [key: string]: string;
            }[];
            /** Patch */
            patch: {
                [key: string]: unknown;
            } | null;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    healthz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HealthResponse"];
                };
            };
        };
    };
    readyz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HealthResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    metrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": unknown;
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    create_session: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateSessionRequest"];
            };
        };
        responses: {
            /** @description Existing, identical session. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionResponse"];
                };
            };
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `watermarks_out_of_order`: `low_watermark` is below `high_watermark`, a watermark left out taking the service's setting.
             *     - `hook_address_refused`: A hook URL names an address hooks may reach (no private network unless the service allows it).
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    get_session: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SessionDetailResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Validation failed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    list_items: {
        parameters: {
            query?: {
                after_seq?: number;
                limit?: number;
            };
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ItemsPageResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Validation failed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    append_items: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AppendRequest"];
            };
        };
        responses: {
            /** @description Idempotent replay; nothing written. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AppendResponse"];
                };
            };
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AppendResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `too_many_items`: At most the service's `CTX_MAX_ITEMS_PER_REQUEST` items in one request.
             *     - `reserved_item_type`: Item types starting with `contextd.` are written by the service only.
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             *     - `idempotency_mismatch`: An idempotency key names one batch: a retry repeats it exactly.
             *     - `malformed_item`: With `malformed: refuse`, every item of a known type has the fields a provider reads in the shape every format needs (a message's `role` and `content`, a call's `name` and `arguments`, an output's `output`).
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    report_usage: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UsageRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            204: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    retract: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RetractionRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RetractionResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    reset: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ResetResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Validation failed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    recall: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RecallRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RecallResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `seq_range_reversed`: `from_seq` is not after `to_seq`.
             *     - `invalid_pattern`: `pattern` is a regular expression RE2 compiles (no backreferences, no lookaround).
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The tenant has `CTX_RECALL_MAX_CONCURRENT_PER_TENANT` searches under way already (`tenant_busy`); retry after the given seconds. */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    evaluate: {
        parameters: {
            query?: never;
            header?: {
                prefer?: string | null;
            };
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["EvaluateRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EvaluateResponse"];
                };
            };
            /** @description Run as a job: more than `CTX_EVALUATE_SYNC_CALLS` calls to replay, or `Prefer: respond-async`. `Location` names the job. */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EvaluationJobResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The session holds more facts than `CTX_EVALUATE_MAX_FACTS`, or the variants would replay more calls than `CTX_EVALUATE_MAX_CALLS` (`payload_too_large`); nothing was replayed. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `variant_names`: Each evaluation variant has a name of its own, and none is `current`, the name of the session's own settings.
             *     - `watermarks_out_of_order`: `low_watermark` is below `high_watermark`, a watermark left out taking the service's setting.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description The tenant has `CTX_EVALUATE_MAX_CONCURRENT_PER_TENANT` evaluations under way already (`tenant_busy`); retry after the given seconds. */
            429: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    get_evaluation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                evaluation_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EvaluationJobResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Validation failed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    cancel_evaluation: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                evaluation_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EvaluationJobResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Validation failed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    normalize: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["NormalizeRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NormalizeResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Validation failed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    get_history: {
        parameters: {
            query?: {
                output_format?: "responses" | "chat" | "anthropic";
                /** @description Comma-separated, of: text, image, audio. */
                input_modalities?: string;
            };
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HistoryResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Validation failed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    assemble: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["AssembleRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AssembleResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `duplicate_candidate_ids`: Candidate ids are distinct within one source.
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    get_assembly: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                assembly_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StoredAssemblyResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Validation failed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    replay_assembly: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                assembly_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ReplayRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReplayResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `duplicate_candidate_ids`: Candidate ids are distinct within one source.
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    put_goal: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["GoalRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["GoalResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `blank_goal`: The goal's `text` holds a character that is not white space.
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    put_world_state: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["WorldStateRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WorldStateResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `invalid_world_state`: A world-state section is not null (leave it out to remove it).
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    compact: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CompactRequest"];
            };
        };
        responses: {
            /** @description Dry run, no-op or stateless. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CompactResponse"];
                };
            };
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CompactResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    compaction_advice: {
        parameters: {
            query?: {
                /** @description The lineage whose prompt cache prices the advice (default: the session's unit). */
                unit?: string | null;
            };
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AdviceResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Validation failed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    context_window: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ContextWindowResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Validation failed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    end_session: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["EndSessionRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EndSessionResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `conclusion_not_one_item`: A conclusion converts to exactly one item.
             *     - `reserved_item_type`: Item types starting with `contextd.` are written by the service only.
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    delegate: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["DelegateRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChildSessionResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `reserved_item_type`: Item types starting with `contextd.` are written by the service only.
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    fork: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ForkRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChildSessionResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    merge: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                session_id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ConclusionRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            201: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ConclusionResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `conclusion_not_one_item`: A conclusion converts to exactly one item.
             *     - `reserved_item_type`: Item types starting with `contextd.` are written by the service only.
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    get_manifest: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ManifestResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Validation failed. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
    put_manifest: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                name: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ManifestRequest"];
            };
        };
        responses: {
            /** @description Successful Response */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ManifestVersionResponse"];
                };
            };
            /** @description Malformed JSON. */
            400: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Missing or unknown API key. */
            401: {
                headers: {
                    /** @description The Bearer challenge (RFC 6750): `Bearer realm="contextd"`, with `error="invalid_token"` for an unknown key, `error="invalid_request"` for a malformed header. */
                    "WWW-Authenticate"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Not found (or owned by another tenant). */
            404: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Conflict. */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Body or item too large. */
            413: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /**
             * @description Validation failed (`validation_error`), or a rule the schema cannot state was broken, answered with the rule's code:
             *     - `manifest_inconsistent`: Entry ids are unique; `links`, role views and `priorities` name entries of the manifest; links form no cycle.
             *     - `unstorable_value`: Text holds no NUL character, and an item's `type` is at most 64 characters.
             */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
            /** @description Database unavailable; retry after the given seconds. For a request that writes, `details.write_in_doubt` says whether the write may have been applied (the database went quiet after it was sent): a retry with the same idempotency key is safe. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ErrorResponse"];
                };
            };
        };
    };
}
