"""The MTP drafter head: a light "late exit" block that reads the backbone's own KV cache.

Contract (LiteRT-LM `mtp_drafter`, see LiteRT-LM llm_litert_mtp_drafter.cc):
  in  activations [1,1,2H] = concat(embedder(token), h)   h = backbone activation at the first step, then our own
                                                            projected_activations
  in  input_pos  [1]       = position of `token` (its KV is NOT in the cache yet) -- the same for all K steps.
                            LiteRT-LM passes the newest cached token's position (one less): the exported graph adds 1
  in  mask       [1,1,1,C]  keys the engine lets us see; the slot at the head's input_pos is stale, so the head also
                            hides it internally (keys must be < input_pos)
  in  kv_cache_k_i / kv_cache_v_i of the layers we read (read-only, the backbone's buffers)
  out logits [1,1,V] (full vocabulary; the draft vocabulary is scattered back with a gather)
  out projected_activations [1,1,H]  (with copy_follow its last 2F + 1 dims carry the copy read's position code and
                                      the draft step: see MTPHead.unpack)
Attention is query-only: each read layer gets its own query projection roped with that layer's theta, so one block
can read a global and a sliding layer at once.

Copy read (copy_heads > 0): layer 0's V cache is a function of each cached token alone (v_proj of the normed
embedding), so it is a token-identity table of the text, already in the shared buffers. The head matches its query
against it (the token at j and at j-1, unrotated: content, not position), reads the identity of the token at j+1, and
adds pointer logits for it: induction-style copying, which the learned attention over late layers did not learn from
the topic corpus (it got a third of the positions prompt lookup copies right; lab/notes/PERF.md, 'Copy read').
"""
import json
import math
from dataclasses import dataclass, asdict, field

import numpy as np
import torch
from torch import nn

from mtplite.model.decoder import NEG_INF, RMSNorm, attend, rope_tables, rotate, v_rows, window_mask


@dataclass
class HeadConfig:
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    read_layers: list  # backbone layers whose KV the head reads
    rope_theta: list  # per read layer
    sliding_window: list  # per read layer, 0 = global
    vocab_size: int
    K: int = 3
    rms_eps: float = 1e-6
    act: str = "silu"
    attn_scale: float = 0.0
    draft_ids: list = field(default_factory=list)  # draft index -> full vocab id (frequency ranked)
    copy_heads: int = 0  # pointer heads over layer 0's V cache (0 = none)
    context: int = 0  # the context draft space it trained with: ids of the text outside the draft space (see step)
    copy_exact: float = 0.0  # nats added to the pointer logit of a token read (near) exactly (see CopyRead.forward)

    # What follows is built in, not configured: each was measured once and has one value.
    @property
    def draft_vocab_size(self):
        return len(self.draft_ids)

    @property
    def intermediate_size(self):  # the MLP is twice the hidden size wide
        return 2 * self.hidden_size

    @property
    def copy_follow(self):  # frequencies of the carried read-position code: the pointer continues its match
        return default_follow(self.hidden_size, self.copy_heads)

    def to_json(self):
        return asdict(self)


MAX_COPY_HEADS = 8
CONTEXT = 128  # the context draft space a head trains with by default: ids of the text outside its draft vocabulary
# The carried step index, in units the backbone's final-normed activation does not reach (|h| < FLAG / 2; on 64
# distilled rows each Gemma 3 270M's max |h| is 133, 23 in the last dim, SmolLM2's 55 and 5:
# lab/results/micro/activation_range.json): at the first draft
# step the engine hands the head the backbone's h, so a small value in the flag slot means "step 1". Training
# refuses a backbone whose h gets there (train.rollout_loss). Multiples of 4096 stay exact in fp16 up to step 15.
FLAG = 4096.0
EXACT_COS = 0.9  # a read this close to a token's row counts as exact for copy_exact


def check_context(n, flag="--context"):
    """The context draft space's size a command takes (train, export)."""
    from mtplite.errors import UserError

    if n < 0:
        raise UserError(f"{flag} {n}: ids of the text the head may also draft, 0 (none) or more")


def check_copy_heads(n, flag="--copy-heads"):
    """The pointer-head count a command takes (the same bound head.json is checked against on load). One head is
    refused before training, not after it: its drafter graph does not convert (the LiteRT converter folds the
    one-head score matmul into a 'tfl.batch_matmul' of invalid output rank; measured with litert-torch 0.10)."""
    from mtplite.errors import UserError

    if not 0 <= n <= MAX_COPY_HEADS:
        raise UserError(f"{flag} {n}: use 0 (none) to {MAX_COPY_HEADS}")
    if n == 1:
        raise UserError(f"{flag} 1: a one-head copy read does not convert to LiteRT; use 2 (the default) or 0")


def default_read_layers(c):
    """Sliding-window backbones: the last global-attention layer and the last sliding one (what Gemma 4's edge
    drafters read). Full-attention backbones: the last layer.

    With the copy read and the context draft space, reading more layers spread over the depth no longer paid: the
    same held-out and bench τ for a slower drafter and slower training (lab/notes/PERF.md, "a two-layer read")."""
    glob = [i for i in range(c.num_layers) if not c.sliding_window[i]]
    slid = [i for i in range(c.num_layers) if c.sliding_window[i]]
    if not slid:
        return [c.num_layers - 1]
    return sorted({slid[-1]} | ({glob[-1]} if glob else set()))


def default_follow(hidden_size, copy_heads, F=16):
    """The read-position code's frequencies: 16 (its cosine kernel stays under 0.5 off its peak over 4,096
    positions), fewer where the slot (2F + 1 dims of the carried activation) would take over an eighth of it."""
    if not copy_heads:
        return 0
    return max(0, min(F, (hidden_size // 8 - 1) // 2))


def head_config(bc, draft_ids, K=3, read_layers=None, copy_heads=0, context=0):
    rl = read_layers or default_read_layers(bc)
    return HeadConfig(
        hidden_size=bc.hidden_size, num_heads=bc.num_heads, num_kv_heads=bc.num_kv_heads, head_dim=bc.head_dim,
        read_layers=list(rl), rope_theta=[bc.rope_theta[i] for i in rl], sliding_window=[bc.sliding_window[i] for i in rl],
        vocab_size=bc.vocab_size, K=K, rms_eps=bc.rms_eps, act=bc.act, attn_scale=bc.attn_scale,
        draft_ids=list(map(int, draft_ids)), copy_heads=copy_heads, context=context)


class HeadBlock(nn.Module):
    def __init__(self, c: HeadConfig):
        super().__init__()
        H, nh, d = c.hidden_size, c.num_heads, c.head_dim
        self.c = c
        # in the input's shape: after a row norm the converter duplicated the fully-connected op before it (MTPHead.fc,
        # whose output the residual also reads), reading its weights twice per draft step
        self.attn_norm = RMSNorm(H, c.rms_eps, False, rows=False)
        self.q_proj = nn.ModuleList([nn.Linear(H, nh * d, bias=False) for _ in c.read_layers])
        self.o_proj = nn.Linear(nh * d * len(c.read_layers), H, bias=False)
        self.mlp_norm = RMSNorm(H, c.rms_eps, False)
        self.gate_proj = nn.Linear(H, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(H, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, H, bias=False)

    @staticmethod
    def prepare(c, pos, mask, kv, dtype):
        """Per read layer (K, V, its mask, its rope tables): the same for every draft step of a cycle."""
        out = []
        for j, (kc, vc) in enumerate(kv):
            m = mask
            if c.sliding_window[j]:
                m = m + window_mask(pos, kc.shape[2], c.sliding_window[j], mask.dtype)
            out.append((kc, vc, m, *rope_tables(pos, c.head_dim, c.rope_theta[j], dtype)))
        return out

    def forward(self, x, reads):
        """x [B,T,H]; reads: prepare's per-layer tuples."""
        c = self.c
        B, T, _ = x.shape
        xn = self.attn_norm(x)
        outs = []
        for j, (kc, vc, m, cos, sin) in enumerate(reads):
            q = rotate(self.q_proj[j](xn).view(B, T, c.num_heads, c.head_dim).transpose(1, 2), cos, sin)
            outs.append(attend(q, kc, vc, m, c.attn_scale).transpose(1, 2).reshape(B, T, -1))
        x = x + self.o_proj(torch.cat(outs, -1))
        xn = self.mlp_norm(x)
        g = self.gate_proj(xn)
        g = torch.nn.functional.gelu(g, approximate="tanh") if c.act == "gelu_tanh" else torch.nn.functional.silu(g)
        return x + self.down_proj(g * self.up_proj(xn))


def shift(x, n, fill):
    """x[..., j - n] along the last axis (n = 1: right, n = -1: left), `fill` where it falls outside."""
    pad = torch.full((*x.shape[:-1], abs(n)), fill, dtype=x.dtype)
    return torch.cat([pad, x[..., :-n]], -1) if n > 0 else torch.cat([x[..., -n:], pad], -1)


def unit_rms(x, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def token_rows(dec, ids):
    """[n,dt] each id's row as layer 0 writes it into its V cache (a function of the token alone), unit RMS."""
    l0 = dec.layers[0]
    return unit_rms(l0.v_proj(l0.input_layernorm(dec.embed(torch.as_tensor(ids)[None])))[0].float())


def context_ids(history, space_map, space, M):
    """The context draft space: the M most recently seen distinct ids of `history` outside the draft space (space_map
    [V]: id -> draft-space index, `space` for none), newest first, each with its latest position. Vectorised: the
    runtime calls it every draft cycle."""
    h = np.asarray(history, dtype=np.int64)
    j = np.flatnonzero(np.asarray(space_map)[h] >= space) if len(h) else h
    if not len(j):
        return []
    rev = j[::-1]  # positions, newest first
    _, first = np.unique(h[rev], return_index=True)  # each id's newest position
    return [(int(h[p]), int(p)) for p in rev[np.sort(first)[:M]]]


def context_rows(v0, positions):
    """[n,dt] layer 0's V rows at `positions` of a cache [1,KVH,D,C] (torch or numpy), unit RMS: the rows the copy read
    scores the context draft space's ids by (equal to token_rows of the ids cached there)."""
    return unit_rms(v_rows(torch.as_tensor(v0), list(positions))[0].float())


def follow_freqs(F, span=4096, tries=64):
    """F frequencies in (0.05, pi) whose mean-cosine kernel stays lowest off its peak over `span` positions (random
    draws, the best of `tries`; deterministic). Evenly spaced or golden-ratio ones alias: their kernel nears 1 again
    within 4,096 positions. Saved with the head, so a head keeps its own."""
    d = torch.arange(1, span, dtype=torch.float64)[:, None]
    best = None
    for seed in range(tries):
        w = 0.05 + (math.pi - 0.05) * torch.rand(F, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        side = float(torch.cos(d * w[None]).mean(1).max())
        if best is None or side < best[0]:
            best = (side, w)
    return best[1].float()


class CopyRead(nn.Module):
    """Pointer heads over the token-identity table E (layer 0's V cache, one unit-RMS row per cached position).

    Head h scores position j by how well the text ending at j matches the text ending at the current token, over j
    whose successor j+1 is cached, and reads a_h = sum_j p_j E_{j+1}: the token that followed the match. Its logits
    are a_h's similarity to each draft token's own row of E, scaled by beta_h and gated by sigmoid(w . x +
    gamma_h * logsumexp(scores)) (how good the best match is); a_h also enters the residual so the carried state knows
    what was copied. Only [C]-long score vectors are shifted, never the cache.

    The trigram pointer starts as prompt lookup's first draft and learns from there:
      the current token's query is its own row (a map of its embedding, initialised to layer 0's), not the stream;
      the previous two tokens' queries are learned from the stream plus, behind a learned gate, the rows cached at
      pos-1 and pos-2 -- exactly the previous tokens at the first draft step, stale at later ones (the gate learns
      to tell the backbone's activation from the head's own);
      a learned recency penalty per position back breaks ties between equal matches as lookup does (latest wins).
    copy_follow F > 0 continues the match at later draft steps, as lookup does (it drafts s+1, s+2, s+3 of one match):
      the read distribution's position code sum_j p_j [cos(w j), sin(w j)] (F fixed frequencies) rides in the carried
      activation, and the next step scores each match end j by the code's kernel at j, peaked where the last step
      read; the current token's term then checks that the draft fed back is the token read there. The carried step
      index (see MTPHead.unpack) routes the cached rows: at step 2 the row at pos-1 is the previous-but-one token.
      Re-matching alone lost most at later steps: cumulative acceptance by depth 0.66 / 0.49 / 0.34 against lookup's
      0.78 / 0.70 / 0.66 (lab/notes/PERF.md).
    """

    def __init__(self, c: HeadConfig):
        super().__init__()
        H, n, dt = c.hidden_size, c.copy_heads, c.num_kv_heads * c.head_dim
        self.n, self.dt = n, dt
        self.norm = RMSNorm(H, c.rms_eps, False)
        self.q_cur = nn.Linear(H, n * dt, bias=False)
        self.q_prev = nn.Linear(H, n * dt, bias=False)
        self.gate = nn.Linear(H, n)
        self.gamma = nn.Parameter(torch.zeros(n))
        self.beta = nn.Parameter(torch.full((n,), 8.0))
        self.o_proj = nn.Linear(n * dt, H, bias=False)
        nn.init.zeros_(self.o_proj.weight)
        self.emb_norm = RMSNorm(H, c.rms_eps, False)
        self.q_prev2 = nn.Linear(H, n * dt, bias=False)
        self.match = nn.Parameter(torch.full((3, n), 8.0))  # nats for an exact match of cur, prev, prev2
        self.cached_gate = nn.Linear(H, 2 * n)  # rows at pos-1, pos-2 as prev, prev2
        self.recency = nn.Parameter(torch.full((n,), math.log(1 / 256)))
        self.follow = c.copy_follow
        if self.follow:
            self.register_buffer("follow_freqs", follow_freqs(self.follow))
            self.follow_w = nn.Parameter(torch.full((n,), 8.0))  # nats for "this is where the last step read"
            # per draft step, the weight of: row pos-1 as prev, row pos-2 as prev2, row pos-1 as prev2
            rw = torch.zeros(c.K, 3, n)
            rw[0, :2] = 1.0
            if c.K > 1:
                rw[1, 2] = 1.0
            self.row_w = nn.Parameter(rw)
        # each draft token's row of E (set from the backbone by init_from_backbone; saved)
        self.register_buffer("token_rows", torch.zeros(c.draft_vocab_size, dt))
        self.exact = float(c.copy_exact)

    def codes(self, C):
        """[C,2F] the position code of every cache slot."""
        ang = torch.arange(C, dtype=torch.float32)[:, None] * self.follow_freqs[None]
        return torch.cat([torch.cos(ang), torch.sin(ang)], -1)

    def prepare(self, mask, v0, pos, ctx_rows=None):
        """What the copy read's every draft step of a cycle shares (the cache's rows, their match with the rows at
        pos-1 and pos-2, the masks, the recency penalty), computed once: mask [B|1,1,T,C] (keys < pos visible); v0
        [B,KVH,D,C] layer 0's V cache; pos [T]; ctx_rows [B|1,M,dt]: the context ids' rows (see MTPHead.step)."""
        C = v0.shape[-1]
        E = unit_rms(v_rows(v0))  # [B,C,dt]
        Ef = E.float()  # float32 once for the exact-match terms (a no-op when the cache is float32)
        EfT = Ef.transpose(-1, -2)[:, None]  # [B,1,dt,C]
        # the rows at pos-1 and pos-2, picked by a one-hot matmul (no gather in the graph)
        back = pos.to(torch.float32)[:, None] - torch.arange(C, dtype=torch.float32)[None]  # [T,C] = pos - j
        c1, c2 = [torch.matmul(torch.matmul((back == i).float()[None], Ef), Ef.transpose(-1, -2))[:, None] / self.dt
                  for i in (1, 2)]  # [B,1,T,C] each: the rows at pos-1, pos-2 against every cached row
        # j and j+1 both visible (j+1 < pos): the successor must be cached
        m = mask.float()
        # back - 1 = positions from j's successor to the newest cached token; masked positions are clamped, not used
        recency = self.recency.float().exp()[None, :, None, None] * (back - 1).clamp(min=0)[None, None]
        bias = m + shift(m, -1, NEG_INF) - recency
        return {"E": E, "Et": E.transpose(-1, -2)[:, None], "EfT": EfT, "c1": c1, "c2": c2, "bias": bias,
                "P": self.codes(C) if self.follow else None,
                "ctx_rows": None if ctx_rows is None else ctx_rows.transpose(-1, -2)}

    def scores(self, xn, emb, k, code, prep):
        """[B,n,T,C] match scores of each position j (before the successor shift and the masks). k [B,T,1]: the draft
        step - 1, code [B,T,2F]: the last step's read-position code (zero at step 1); both None without
        copy_follow."""
        B, T, _ = xn.shape
        heads = lambda q: q.view(B, T, self.n, self.dt).transpose(1, 2)  # noqa: E731
        scale = self.dt ** -0.5
        w = self.match.float()[:, None, :, None, None]  # [3,1,n,1,1]
        # the current token: cosine of its own row with every cached row
        qc = unit_rms(heads(self.q_cur(self.emb_norm(emb))).float())
        s = w[0] * torch.matmul(qc, prep["EfT"]) / self.dt
        g = torch.sigmoid(self.cached_gate(xn).float()).transpose(1, 2)  # [B,2n,T]
        c1, c2 = prep["c1"], prep["c2"]
        prev = (c1, c2)  # as the previous and the previous-but-one token
        if self.follow:  # the step picks each cached row's role
            st = (k == torch.arange(self.row_w.shape[0], dtype=k.dtype)).float()  # [B,T,K] one-hot
            cw = torch.matmul(st, self.row_w.float().reshape(st.shape[-1], -1)).transpose(1, 2)[..., None]  # [B,3n,T,1]
            n = self.n
            prev = (cw[:, :n] * c1, cw[:, n : 2 * n] * c2 + cw[:, 2 * n :] * c1)
        for i, q in ((1, self.q_prev), (2, self.q_prev2)):
            learned = torch.matmul(heads(q(xn)), prep["Et"]).float() * scale
            s = s + shift(learned + w[i] * g[:, (i - 1) * self.n : i * self.n, :, None] * prev[i - 1], i, 0.0)
        if self.follow:  # mean_f cos(w_f (r - j)): 1 at the last read position r, under 0.5 elsewhere
            near = torch.matmul(code.float(), prep["P"].t())[:, None] / self.follow  # [B,1,T,C]
            s = s + self.follow_w.float()[None, :, None, None] * near
        return s

    def forward(self, x, emb, k, code, prep):
        """x [B,T,H]; emb [B,T,H] the current token's embedding; k, code: see scores; prep: prepare's ->
        (residual add [B,T,H], logits [B,T,N(+M)], this step's read-position code [B,T,2F] or None)."""
        B, T, _ = x.shape
        E = prep["E"]
        xn = self.norm(x)
        s = self.scores(xn, emb, k, code, prep) + prep["bias"]
        lse = torch.logsumexp(s, -1)  # [B,n,T]
        p = shift(torch.softmax(s, -1).to(E.dtype), 1, 0.0)  # weight on j moved to j+1
        a = torch.matmul(p, E[:, None])  # [B,n,T,dt]
        g = torch.sigmoid(self.gate(xn).transpose(1, 2) + self.gamma[None, :, None] * lse)  # [B,n,T]
        # the heads' reads mixed before the one matmul with the token table (once, not once per head):
        # sum_h g_h beta_h cos(a_h, row)
        mix = ((g * self.beta[None, :, None])[..., None] * a).sum(1)  # [B,T,dt]
        # a linear layer over the token table, so it exports as FULLY_CONNECTED and the int8 recipe quantizes it
        logits = nn.functional.linear(mix.to(self.token_rows.dtype), self.token_rows) / self.dt  # [B,T,N]
        # the rows are unit RMS, so a logit over this is the read's cosine with the token's row (only computed where
        # used: the graph of a head without the sharpening stays as it was)
        strength = mix.float().norm(dim=-1, keepdim=True) * self.dt ** -0.5 + 1e-6 if self.exact else None
        ctx = None
        if prep["ctx_rows"] is not None:  # the context ids' pointer logits: the same read against their rows
            ctx = torch.matmul(mix.to(prep["ctx_rows"].dtype), prep["ctx_rows"]) / self.dt
        if self.exact:
            # Layer 0's rows of a word's inflections are close (Gemma 3 270M: " buy" / " bought" cosine 0.80, " was" /
            # " were" 0.88, mean |cos| 0.25), so a read of " bought" scores " buy" only ~3 nats lower and the
            # vocabulary logits, which model the grammar, decide which form is copied. A bonus for a near-exact read
            # (cosine > EXACT_COS) keeps the copied form; its size is chosen on held-out rows
            # (see lab/notes/PERF.md).
            bonus = lambda z: (self.exact / (1 - EXACT_COS)) * torch.relu(z.float() / strength - EXACT_COS)  # noqa: E731
            logits = logits + bonus(logits).to(logits.dtype)
            if ctx is not None:
                ctx = ctx + bonus(ctx).to(ctx.dtype)
        if ctx is not None:
            logits = torch.cat([logits, ctx], -1)
        out = torch.matmul(p.float().mean(1), prep["P"]) if self.follow else None  # [B,T,2F], heads pooled
        return self.o_proj(a.transpose(1, 2).reshape(B, T, -1)), logits, out

    @torch.no_grad()
    def init_from_backbone(self, dec, draft_ids):
        """E rows of the draft tokens, as layer 0 writes them into its V cache; q_cur starts as the same map (so a
        token's query matches its own earlier occurrences), the learned previous-token queries at zero, the cached
        rows' gates open."""
        self.token_rows.copy_(token_rows(dec, draft_ids))
        l0 = dec.layers[0]
        w = l0.v_proj.weight * (l0.input_layernorm.weight + 1.0 if l0.input_layernorm.offset else l0.input_layernorm.weight)
        for h in range(self.n):
            self.q_cur.weight[h * self.dt : (h + 1) * self.dt] = w
        self.q_prev.weight.zero_()
        self.q_prev2.weight.zero_()
        self.cached_gate.weight.zero_()
        self.cached_gate.bias.fill_(3.0)


class MTPHead(nn.Module):
    def __init__(self, c: HeadConfig):
        super().__init__()
        H = c.hidden_size
        self.c = c
        self.emb_norm = RMSNorm(H, c.rms_eps, False)
        self.hid_norm = RMSNorm(H, c.rms_eps, False)
        self.fc = nn.Linear(2 * H, H, bias=False)
        self.blocks = nn.ModuleList([HeadBlock(c)])  # one block: a second measured no gain (lab/notes/PERF.md)
        self.copy = CopyRead(c) if c.copy_heads else None
        self.out_norm = RMSNorm(H, c.rms_eps, False)
        self.draft_head = nn.Linear(H, c.draft_vocab_size, bias=False)
        self.space = c.draft_vocab_size  # the draft space: the vocabulary head's N ids
        # full vocab id -> draft-space index, or `space` for ids outside it (never drafted)
        ids = torch.tensor(list(c.draft_ids), dtype=torch.long)
        vmap = torch.full((c.vocab_size,), self.space, dtype=torch.int32)
        vmap[ids] = torch.arange(self.space, dtype=torch.int32)
        self.register_buffer("vocab_map", vmap, persistent=False)
        self.register_buffer("draft_ids_t", ids, persistent=False)  # draft-space index -> full vocab id
        self.slot = 2 * c.copy_follow + 1 if c.copy_follow else 0  # the carried activation's last dims, see unpack

    def unpack(self, act):
        """The carried activation -> (the part the stream reads, draft step - 1 [B,T,1], last read code [B,T,2F]).

        The contract carries nothing between draft steps but projected_activations [H], so its last 2F + 1 dims hold
        the copy read's position code and the step index (FLAG per step). At step 1 they are the backbone's own h
        (all of it reaches the stream, and the code reads as zero)."""
        m = self.slot
        k = torch.clamp(torch.floor(act[..., -1:] / FLAG + 0.5), 0, self.c.K - 1)
        later = (k > 0).to(act.dtype)
        return torch.cat([act[..., :-m], act[..., -m:] * (1 - later)], -1), k, act[..., -m:-1] * later

    def pack(self, a, k, code):
        return torch.cat([a[..., : -self.slot], code.to(a.dtype), (k + 1).to(a.dtype) * FLAG], -1)

    @property
    def v_only_layers(self):
        """Layers read for their V alone: layer 0 for the copy read, unless it is a read layer already."""
        return [0] if self.copy is not None and 0 not in self.c.read_layers else []

    @property
    def kv_layers(self):
        """The backbone layers whose (K, V) pairs step() takes, in order: the read layers, then the V-only ones."""
        return list(self.c.read_layers) + self.v_only_layers

    def init_from_backbone(self, backbone):
        if self.copy is not None:
            self.copy.init_from_backbone(backbone, self.draft_ids_t)
        with torch.no_grad():
            self.draft_head.weight.copy_(backbone.lm_head.weight[self.draft_ids_t[: self.c.draft_vocab_size]])
            # start as "h passes through": the carried state begins close to the backbone activation
            self.fc.weight.zero_()
            self.fc.weight[:, self.c.hidden_size:] += torch.eye(self.c.hidden_size) * 0.5
            self.fc.weight[:, : self.c.hidden_size] += torch.eye(self.c.hidden_size) * 0.5
            for b in self.blocks:
                b.o_proj.weight.mul_(0.1)
                b.down_proj.weight.mul_(0.1)

    def prepare(self, pos, mask, kv, ctx=None):
        """What every draft step of one cycle shares, computed once (a cycle's K steps all draft from the same
        position over the same cache): pos [T], mask [B|1,1,T,C], kv the (K, V) pairs of self.kv_layers, ctx (see
        step). The drafter's own causality: keys < pos.

        ctx: the context draft space, (emb [B|1,M,H], rows [B|1,M,dt] or None, mask [B|1,T|1,M] additive): M ids of
        the text so far that lie outside the draft space, with their embedding rows (unscaled: the LM-head rows of a
        tied backbone, which the runtime gets from the embedder graph; any backbone's, so the head learns them where
        they are not tied) and their layer-0 V rows (token_rows). Each gets the logit a draft-vocabulary id would
        have: those rows on the head's output plus the copy read's pointer logit. A copied token is often a rare one
        (a name, a number): 12% of the benchmark's rewrite and summarize positions had a label outside Gemma's 4,096-id
        draft vocabulary, and most of those labels occur earlier in the text (lab/notes/PERF.md)."""
        C = kv[0][1].shape[-1]
        stale = torch.arange(C, dtype=torch.int32)[None, :] >= pos[:, None].to(torch.int32)
        mask = mask + torch.where(stale, torch.tensor(NEG_INF), torch.tensor(0.0))[None, None]
        n = len(self.c.read_layers)
        prep = {"reads": HeadBlock.prepare(self.c, pos, mask, kv[:n], self.fc.weight.dtype), "copy": None,
                "ctx": None if ctx is None else (ctx[0].transpose(-1, -2), ctx[2])}
        if self.copy is not None:
            v0 = kv[n][1] if len(kv) > n else kv[self.c.read_layers.index(0)][1]
            prep["copy"] = self.copy.prepare(mask, v0, pos, None if ctx is None else ctx[1])
        return prep

    def step(self, x2, prep):
        """x2 [B,T,2H], prep: prepare's -> (draft-space logits [B,T,N+Nc(+M)], projected [B,T,H])."""
        H = self.c.hidden_size
        emb, act = x2[..., :H], x2[..., H:]
        k = code = None
        if self.slot:
            act, k, code = self.unpack(act)
        x = self.fc(torch.cat([self.emb_norm(emb), self.hid_norm(act)], -1))
        for b in self.blocks:
            x = b(x, prep["reads"])
        if self.copy is None:
            a = self.out_norm(x)
            d, ptr_ctx, carried = self.draft_head(a), 0.0, a
        else:
            add, ptr, out = self.copy(x, emb, k, code, prep["copy"])
            a = self.out_norm(x + add)
            lm = self.draft_head(a)
            N = self.space
            d = lm + ptr[..., :N]
            ptr_ctx, carried = ptr[..., N:], (self.pack(a, k, out) if self.slot else a)
        if prep["ctx"] is not None:  # the context ids: their embedding rows on the head's output + pointer logits
            embT, cmask = prep["ctx"]
            d = torch.cat([d, torch.matmul(a, embT) + ptr_ctx + cmask], -1)
        return d.float(), carried

    def full_logits(self, draft_logits):
        """Draft logits placed at their full-vocabulary ids, NEG_INF elsewhere (the contract's output).

        A scatter of the N draft logits into a NEG_INF row, not a gather of V entries: in LiteRT the gather
        (GATHER_ND over 262k ids) took ~1.7 ms of a ~3 ms Gemma drafter step, the scatter (STABLEHLO_SCATTER) ~0.5 ms.
        """
        lead = draft_logits.shape[:-1]
        flat = draft_logits.reshape(-1, self.space)
        base = torch.full((flat.shape[0], self.c.vocab_size), NEG_INF, dtype=flat.dtype)
        idx = self.draft_ids_t[None, :].expand(flat.shape[0], -1)
        return base.scatter(1, idx, flat).reshape(*lead, self.c.vocab_size)

    def forward(self, activations, input_pos, mask, kv):
        """The exported signature: logits over the full vocabulary and projected_activations."""
        d, a = self.step(activations, self.prepare(input_pos, mask, kv))
        return self.full_logits(d), a


def _rebuilt(head: MTPHead, strict=True, **changes):
    """A new head of `head`'s config with `changes`, its weights loaded from `head` (strict=False: the new config
    has parameters `head` lacks, left for the caller to set), in the same train/eval mode."""
    import dataclasses

    h = MTPHead(dataclasses.replace(head.c, **changes))
    h.load_state_dict(head.state_dict(), strict=strict)
    return h.train(head.training)


def with_copy_exact(head: MTPHead, value):
    """A copy of `head` drafting with copy_exact = value (a config number; the weights are the same)."""
    return _rebuilt(head, copy_exact=float(value))


def save_head(head: MTPHead, out_dir, meta: dict):
    """head.safetensors + head.json, each written atomically."""
    from pathlib import Path

    from safetensors.torch import save_file

    from mtplite.paths import atomic_path, write_text_atomic

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    sd = {k: v.detach().contiguous().float() for k, v in head.state_dict().items()}
    with atomic_path(out / "head.safetensors") as tmp:
        save_file(sd, str(tmp), metadata={"format": "pt"})
    # the head's own config wins: meta may be a loaded head.json (its old config) carried over to a changed head
    doc = {"format": "mtplite-head", "version": HEAD_VERSION, "config": head.c.to_json(),
           **{k: v for k, v in meta.items() if k not in ("format", "version", "config")}}
    write_text_atomic(out / "head.json", json.dumps(doc, indent=1))


# version 2: the retired experiments' fields are gone (RETIRED); 3: fields with one built-in value are gone (BUILT_IN)
HEAD_VERSION = 3
# Config fields of experiments that did not pay, retired (their code is in git tag lab-before-retire-39): a head
# saved with the value that is now built in loads; one that used the experiment is refused with the reason.
RETIRED = {"copy_ngram": (3, "the bigram pointer (copy_ngram 2)"), "copy_ids": ([], "copy-only ids (--copy-vocab)"),
           "num_blocks": (1, "more than one block (--blocks)")}
UNUSED = ("norm_offset",)  # copied from the backbone's config, never read by the head (its norms have no offset)
# Fields a version-2 head.json holds that are now properties of the config: each must have the built-in value.
BUILT_IN = {"draft_vocab_size": lambda c: len(c.get("draft_ids", [])),
            "intermediate_size": lambda c: 2 * c.get("hidden_size", 0),
            "copy_follow": lambda c: default_follow(c.get("hidden_size", 0), c.get("copy_heads", 0))}


def _current(cfg, version):
    """A saved head's config with the retired fields dropped; ValueError where the head used one of them."""
    cfg = dict(cfg)
    if version < 2 and cfg.get("copy_heads") and "copy_ngram" not in cfg:
        cfg["copy_ngram"] = 2  # saved before the trigram pointer, whose field then did not exist
    for k in UNUSED:
        cfg.pop(k, None)
    for k, (built_in, what) in RETIRED.items():
        if k in cfg and cfg.pop(k) != built_in:
            raise ValueError(f"trained with {what}, which was retired (git tag lab-before-retire-39); retrain the head")
    for k, value in BUILT_IN.items():
        if k in cfg:
            v = cfg.pop(k)
            if v != value(cfg):
                raise ValueError(f"{k}={v!r}, where every head now has {value(cfg)!r} (retired: git tag "
                                 "lab-before-redesign-39); retrain the head")
    return cfg


def _validate(c: HeadConfig):
    """Every field a hostile head.json could set, checked before anything is allocated from it."""
    ints = ("hidden_size", "num_heads", "num_kv_heads", "head_dim", "vocab_size", "K")
    for k in ints:
        v = getattr(c, k)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 < v < (1 << 22):
            raise ValueError(f"{k}={v!r} out of range")
    if c.num_heads % c.num_kv_heads or c.K > 16:
        raise ValueError("num_heads must be a multiple of num_kv_heads, K <= 16")
    if not isinstance(c.copy_heads, int) or isinstance(c.copy_heads, bool) or not 0 <= c.copy_heads <= MAX_COPY_HEADS:
        raise ValueError(f"copy_heads={c.copy_heads!r} must be 0-{MAX_COPY_HEADS}")
    n = len(c.read_layers) if isinstance(c.read_layers, list) else -1
    if not 0 < n <= 8 or any(not isinstance(x, int) or isinstance(x, bool) or x < 0 for x in c.read_layers):
        raise ValueError("read_layers must be 1-8 layer indices")
    for k in ("rope_theta", "sliding_window"):
        v = getattr(c, k)
        if not isinstance(v, list) or len(v) != n or any(not isinstance(x, (int, float)) or isinstance(x, bool)
                                                         or not 0 <= x < 1e12 for x in v):
            raise ValueError(f"{k} must hold one non-negative number per read layer")
    if not isinstance(c.draft_ids, list) or not c.draft_ids or len(set(c.draft_ids)) != len(c.draft_ids):
        raise ValueError("draft_ids must list distinct token ids")
    x = c.copy_exact
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not 0 <= x <= 64 or (x and not c.copy_heads):
        raise ValueError(f"copy_exact={x!r} must be 0-64 nats, and only with copy_heads > 0")
    if any(not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < c.vocab_size for x in c.draft_ids):
        raise ValueError("draft_ids must be token ids < vocab_size")
    for k in ("rms_eps", "attn_scale"):
        if not isinstance(getattr(c, k), (int, float)) or isinstance(getattr(c, k), bool):
            raise ValueError(f"{k} must be a number")
    if c.act not in ("silu", "gelu_tanh"):
        raise ValueError("act must be silu or gelu_tanh")


def load_head(head_dir, backbone_fingerprint=None):
    from pathlib import Path

    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from mtplite.errors import UserError

    d = Path(head_dir)
    jpath, wpath = d / "head.json", d / "head.safetensors"
    for p in (jpath, wpath):
        if not p.exists():
            raise UserError(f"{p}: missing; give the directory `mtplite train` wrote (head.json + head.safetensors)")
    try:
        doc = json.loads(jpath.read_text())
        if not isinstance(doc, dict) or doc.get("format") != "mtplite-head":
            raise ValueError("not an mtplite head.json")
        c = HeadConfig(**_current(doc["config"], doc.get("version", 1)))
        _validate(c)
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, AttributeError) as e:
        raise UserError(f"{jpath}: invalid head config ({str(e)[:200]}); re-run `mtplite train`") from None
    if backbone_fingerprint is not None and doc.get("backbone_fingerprint") != backbone_fingerprint:
        raise UserError(f"{jpath}: head was trained for backbone {doc.get('backbone_fingerprint')} but this backbone "
                        f"is {backbone_fingerprint}; train a head for this backbone with `mtplite train`")
    try:
        sd = load_file(str(wpath))
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise UserError(f"{wpath}: corrupt weights ({str(e).splitlines()[0][:120]}); re-run `mtplite train`") from None
    head = MTPHead(c)
    try:
        head.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        raise UserError(f"{wpath}: weights do not match head.json ({str(e).splitlines()[0][:160]})") from None
    return head.eval(), doc
