(* The token limit shared across API servers, for every N (OB-TOK-1, OB-TOK-2,
   OB-TOK-3 of specs/token-limit.md; the Python model is
   queueref.verify.tokens).

   The model.  Like the fine-grained model OB-MODEL-1 of Model.v, with the
   queued prompt tokens of a server for its slot: a server starts a check of
   a request that adds t tokens (1 <= t <= P), reads counter 1 of every slot
   one at a time, then decides by a rule `rule view t` and, if it admits,
   adds t to its own counter in the same step (check-then-write); a
   prefill_done takes tokens out of a server's count at any time, also
   during its own check.  States, actions and the after_* successors are
   Model.v's (ck_n is the request's tokens t); only the decision differs.

   prefill_done.  The real event lowers counter 1 of server p by the tokens
   of one of p's admitted requests still prefilling -- at most the counter.
   Here a `Finish p` step lowers it by one token (when it is > 0), as
   Model.v's finish does; `prefill_done_reachable` shows that lowering by
   any d <= the counter is d such steps in a row, so every state reachable
   with real prefill_done events is reachable here.  The model allows more
   (amounts that match no request), which is sound for an upper bound; the
   tightness schedules use no prefill_done at all.

   The rules (Python: queueref.verify.tokens.admits_tokens):
     ge_rule Mt view t   = view < Mt       vLLM 0.30.0's AsyncLLM.check_admission
                                           (vllm/v1/engine/async_llm.py) rejects iff
                                           `current_tokens >= max_queued_tokens`;
                                           the new request's own tokens are not
                                           counted
     fits_rule Mt view t = view + t <= Mt  queueref's opt-in

   Theorems:
     tstep_exec            the step relation and the executable step agree
     prefill_done_reachable  a prefill_done of d <= c_p tokens is d unit steps
     ob_tok_1              OB-TOK-1: under ge, for every N, P and Mt >= 1, every
                           reachable state has c_0 + ... + c_{N-1} <= Mt - 1 + N*P
     ob_tok_1_zero_cap     OB-TOK-1, Mt = 0: nothing is ever admitted, the sum is 0
     ob_tok_1_tight        OB-TOK-1 is reached: for N, Mt, P >= 1 the schedule
                           tok_schedule N Mt P runs and ends at exactly Mt - 1 + N*P
     ob_tok_1_exact        both: the worst case is exactly Mt - 1 + N*P
     fits_is_fine          the fits model IS Model.v's fine model with cap Mt and
                           weight P (same reachable states)
     ob_tok_2              OB-TOK-2: under fits the worst case is exactly
                           Mt + (N-1)*min Mt P (Bound.v and Tightness.v)
     ob_tok_3              OB-TOK-3: under write-then-check the admitted tokens never
                           exceed Mt, and reach it (WriteThenCheck.v with W = P)

   Proof of ob_tok_1: by the ghost invariant of Bound.v for the fine model
   with cap M' = Mt - 1 + P and weight P.  A ge admission (view <= Mt - 1,
   t <= P) is a fine admission, since view + t <= Mt - 1 + P; a ge rejection
   is a check that ends without writing, which keeps Bound.v's invariant
   whatever the fine decision would have been (`inv_abandon`, whose proof is
   Bound.inv_reject's, which never uses the decision).  For Mt >= 1, M' >= P,
   so Bound.v's M' + (N-1)*min M' P is exactly Mt - 1 + N*P for N >= 1.
   (A plain simulation into Model.step fails there: a ge rejection with
   view + t <= M' is not a fine step, the fine decision would admit.) *)

From Coq Require Import Arith Bool List Lia.
Import ListNotations.
From Queueref Require Import Model Bound Tightness.
From Queueref Require WriteThenCheck.

(* The two decision rules; each mutant of proofs/coq/theorems.json for them
   replaces one of these lines. *)
Definition ge_rule (Mt view t : nat) : bool := view <? Mt.
Definition fits_rule (Mt view t : nat) : bool := view + t <=? Mt.

Section TokenModel.
  Variables N P : nat.
  Variable rule : nat -> nat -> bool.   (* view, the request's tokens: admit? *)

  Inductive tstep : state -> action -> state -> Prop :=
  | tstep_start : forall s p t,
      p < N -> 1 <= t -> t <= P -> checks s p = None ->
      tstep s (Start p t) (after_start s p t)
  | tstep_read : forall s p c,
      p < N -> checks s p = Some c -> ck_next c < N ->
      tstep s (Read p) (after_read s p c)
  | tstep_admit : forall s p c,
      p < N -> checks s p = Some c -> N <= ck_next c ->
      rule (ck_view c) (ck_n c) = true ->
      tstep s (Decide p) (after_admit s p c)
  | tstep_reject : forall s p c,
      p < N -> checks s p = Some c -> N <= ck_next c ->
      rule (ck_view c) (ck_n c) = false ->
      tstep s (Decide p) (after_reject s p)
  | tstep_prefill : forall s p,     (* one queued token of p leaves the count *)
      p < N -> 0 < slots s p ->
      tstep s (Finish p) (after_finish s p).

  Inductive treachable : state -> Prop :=
  | treach_init : treachable init
  | treach_step : forall s a s', treachable s -> tstep s a s' -> treachable s'.

  (* A prefill_done of d tokens (d <= c_p) from a reachable state leads to a
     reachable state with c_p lowered by d and nothing else changed. *)
  Lemma prefill_done_reachable : forall d s p, treachable s -> p < N -> d <= slots s p ->
    exists s', treachable s' /\ checks s' = checks s /\
      forall q, slots s' q = if q =? p then slots s p - d else slots s q.
  Proof.
    induction d as [|d IH]; intros s p Hr Hp Hd.
    - exists s; split; [exact Hr|]. split; [reflexivity|].
      intros q; destruct (Nat.eqb_spec q p); [subst; lia | reflexivity].
    - destruct (IH s p Hr Hp ltac:(lia)) as (s1 & Hr1 & Hc1 & Hs1).
      assert (Hpos : 0 < slots s1 p) by (rewrite Hs1, Nat.eqb_refl; lia).
      exists (after_finish s1 p); split; [exact (treach_step _ _ _ Hr1 (tstep_prefill s1 p Hp Hpos))|].
      split; [exact Hc1|].
      intros q; unfold after_finish, upd, finished; cbn [slots].
      rewrite !Hs1; destruct (Nat.eqb_spec q p); [subst; rewrite Nat.eqb_refl; lia | reflexivity].
  Qed.

  (* The executable step function: Model.exec with the token rule. *)
  Definition texec (s : state) (a : action) : option state :=
    match a with
    | Start p n =>
        if (p <? N) && (1 <=? n) && (n <=? P) then
          match checks s p with
          | None => Some (after_start s p n)
          | Some _ => None
          end
        else None
    | Read p =>
        if p <? N then
          match checks s p with
          | Some c => if ck_next c <? N then Some (after_read s p c) else None
          | None => None
          end
        else None
    | Decide p =>
        if p <? N then
          match checks s p with
          | Some c =>
              if N <=? ck_next c then
                if rule (ck_view c) (ck_n c)
                then Some (after_admit s p c)
                else Some (after_reject s p)
              else None
          | None => None
          end
        else None
    | Finish p =>
        if (p <? N) && (0 <? slots s p) then Some (after_finish s p) else None
    end.

  Fixpoint trun (s : state) (l : list action) : option state :=
    match l with
    | [] => Some s
    | a :: l' =>
        match texec s a with
        | Some s' => trun s' l'
        | None => None
        end
    end.

  Lemma tstep_exec : forall s a s', tstep s a s' <-> texec s a = Some s'.
  Proof.
    intros s a s'; split.
    - intros H; destruct H; unfold texec.
      + apply Nat.ltb_lt in H; apply Nat.leb_le in H0; apply Nat.leb_le in H1.
        rewrite H, H0, H1, H2; reflexivity.
      + apply Nat.ltb_lt in H; apply Nat.ltb_lt in H1.
        rewrite H, H0, H1; reflexivity.
      + apply Nat.ltb_lt in H; apply Nat.leb_le in H1.
        rewrite H, H0, H1, H2; reflexivity.
      + apply Nat.ltb_lt in H; apply Nat.leb_le in H1.
        rewrite H, H0, H1, H2; reflexivity.
      + apply Nat.ltb_lt in H; apply Nat.ltb_lt in H0.
        rewrite H, H0; reflexivity.
    - destruct a as [p n | p | p | p]; unfold texec; intros H.
      + destruct (p <? N) eqn:Hp; destruct (1 <=? n) eqn:H1; destruct (n <=? P) eqn:HP;
          simpl in H; try discriminate.
        destruct (checks s p) eqn:Hc; try discriminate.
        injection H as <-.
        apply Nat.ltb_lt in Hp; apply Nat.leb_le in H1; apply Nat.leb_le in HP.
        now constructor.
      + destruct (p <? N) eqn:Hp; try discriminate.
        destruct (checks s p) as [c|] eqn:Hc; try discriminate.
        destruct (ck_next c <? N) eqn:Hk; try discriminate.
        injection H as <-.
        apply Nat.ltb_lt in Hp; apply Nat.ltb_lt in Hk.
        now apply tstep_read.
      + destruct (p <? N) eqn:Hp; try discriminate.
        destruct (checks s p) as [c|] eqn:Hc; try discriminate.
        destruct (N <=? ck_next c) eqn:Hk; try discriminate.
        apply Nat.ltb_lt in Hp; apply Nat.leb_le in Hk.
        destruct (rule (ck_view c) (ck_n c)) eqn:Ha; injection H as <-.
        * now apply tstep_admit.
        * now apply (tstep_reject s p c).
      + destruct (p <? N) eqn:Hp; destruct (0 <? slots s p) eqn:H0;
          simpl in H; try discriminate.
        injection H as <-.
        apply Nat.ltb_lt in Hp; apply Nat.ltb_lt in H0.
        now constructor.
  Qed.

  Lemma trun_reachable : forall l s s',
    treachable s -> trun s l = Some s' -> treachable s'.
  Proof.
    induction l as [|a l IH]; simpl; intros s s' Hr H.
    - injection H as <-; exact Hr.
    - destruct (texec s a) as [t|] eqn:He; try discriminate.
      apply (IH t); [|exact H].
      apply treach_step with s a; [exact Hr|].
      now apply tstep_exec.
  Qed.

  Lemma trun_app : forall l1 l2 s,
    trun s (l1 ++ l2) = match trun s l1 with Some t => trun t l2 | None => None end.
  Proof.
    induction l1 as [|a l1 IH]; intros l2 s; simpl; [reflexivity|].
    destruct (texec s a); [apply IH | reflexivity].
  Qed.

  Lemma trun_one : forall s a l t, texec s a = Some t -> trun s (a :: l) = trun t l.
  Proof. intros s a l t H; cbn [trun]; rewrite H; reflexivity. Qed.

  (* Without a decision, a token run is a run of the fine model (any cap). *)
  Definition is_decide (a : action) : bool :=
    match a with Decide _ => true | _ => false end.

  Lemma trun_run : forall M l s, (forall a, In a l -> is_decide a = false) ->
    trun s l = run N M P s l.
  Proof.
    intros M; induction l as [|a l IH]; intros s Hl; [reflexivity|].
    assert (He : texec s a = exec N M P s a).
    { specialize (Hl a (or_introl eq_refl)); destruct a; [reflexivity..| discriminate | reflexivity]. }
    cbn [trun run]; rewrite He. destruct (exec N M P s a); [|reflexivity].
    apply IH; intros b Hb; apply Hl; right; exact Hb.
  Qed.
End TokenModel.

(* ------------------------------------------------------------------ *)
(* OB-TOK-1: the bound *)

(* Turn boolean comparisons in hypotheses into propositions for lia. *)
Ltac cmp_to_prop :=
  repeat match goal with
  | H : (_ <? _) = true |- _ => apply Nat.ltb_lt in H
  | H : (_ <=? _) = true |- _ => apply Nat.leb_le in H
  end.

(* A check that ends without writing keeps Bound.v's invariant, whatever
   the fine decision would have been (the ghost state does not move).  The
   proof is Bound.inv_reject's, which never uses the decision. *)
Lemma inv_abandon : forall N M W g p,
  inv N M W g ->
  inv N M W (mk_g (after_reject (real g) p) (G g) (rank g) (rd g) (sn g) (cr g)
               (RL g) (L g) (nL g) (ld g) (sl g) (al g)).
Proof.
  intros N M W g p H.
  destruct H as [i_weight0 i_rank0 i_distinct0 i_notRL0 i_RL0 i_L0 i_sum0 i_al0 i_alL0
                 i_sl0 i_lead0 i_stale0 i_fresh0].
  unfold after_reject.
  set (s' := {| slots := slots (real g); checks := upd (checks (real g)) p None |}).
  assert (Hbusy : forall q d, checks s' q = Some d -> q <> p /\ checks (real g) q = Some d).
  { intros q d Hq. cbn [checks s'] in Hq. unfold upd in Hq.
    destruct (Nat.eqb_spec q p); [discriminate|]. split; assumption. }
  assert (Hkeep : forall q r sq a R, drift M (real g) (rank g) q r sq a R ->
                  drift M s' (rank g) q r sq a R).
  { intros q r sq a R Hd. destruct (Nat.eq_dec q p) as [->|Hne].
    - apply drift_release with (real g); [cbn; lia|apply upd_same|exact Hd].
    - apply drift_other_slot with (real g); [reflexivity|apply upd_other; exact Hne|exact Hd]. }
  split; cbn [real G rank rd sn cr RL L nL ld sl al].
  - intros q d Hq' Hd. destruct (Hbusy q d Hd). eauto.
  - intros q d Hq' Hd. destruct (Hbusy q d Hd). eauto.
  - intros p1 p2 d1 d2 H1 H2 Hne Hd1 Hd2.
    destruct (Hbusy p1 d1 Hd1). destruct (Hbusy p2 d2 Hd2). eauto.
  - intros q d Hq' Hd. destruct (Hbusy q d Hd). eauto.
  - exact i_RL0.
  - exact i_L0.
  - exact i_sum0.
  - exact i_al0.
  - exact i_alL0.
  - exact i_sl0.
  - intros j Hj. apply Hkeep, i_lead0, Hj.
  - intros x d Hx Hd Hlt. destruct (Hbusy x d Hd). eauto.
  - intros x d Hx Hd Hfr. destruct (Hbusy x d Hd) as (Hne & Hd0).
    destruct (i_fresh0 x d Hx Hd0 Hfr) as (Hkx & Hvx & Hqx).
    split; [exact Hkx|]. split; [exact Hvx|].
    intros q Hq'. destruct (Hqx q Hq') as (Hs & Hcr & Hdr).
    split; [exact Hs|]. split; [exact Hcr|]. apply Hkeep, Hdr.
Qed.

(* Every reachable state of the ge model is the real part of a ghost state
   satisfying Bound.v's invariant for cap Mt - 1 + P and weight P. *)
Lemma ge_ghost : forall N Mt P s, 1 <= Mt ->
  treachable N P (ge_rule Mt) s -> exists g, real g = s /\ inv N (Mt - 1 + P) P g.
Proof.
  intros N Mt P s HMt Hr. induction Hr as [|s a s' Hr IH Hs].
  - exists ginit; split; [reflexivity | apply inv_init].
  - destruct IH as (g & Hg & Hi).
    destruct Hs as [s p t Hp Ht1 HtP Hc | s p c Hp Hc Hk | s p c Hp Hc Hk Hrule
                   | s p c Hp Hc Hk Hrule | s p Hp Hpos]; subst s.
    + exists (gnext (Mt - 1 + P) g (Start p t) (after_start (real g) p t)).
      split; [reflexivity | apply inv_start; assumption].
    + exists (gnext (Mt - 1 + P) g (Read p) (after_read (real g) p c)).
      split; [unfold gnext; rewrite Hc; reflexivity | apply inv_read; assumption].
    + (* a ge admission is a fine admission with cap Mt - 1 + P *)
      pose proof (i_weight _ _ _ _ Hi p c Hp Hc) as Hw.
      assert (Ha : admits (Mt - 1 + P) (ck_view c) (ck_n c) = true).
      { unfold ge_rule in Hrule; unfold admits. apply Nat.leb_le. cmp_to_prop. lia. }
      exists (gnext (Mt - 1 + P) g (Decide p) (after_admit (real g) p c)).
      split; [unfold gnext; rewrite Hc; destruct (_ && _); reflexivity
             | apply inv_admit; assumption].
    + (* a ge rejection: the check ends without writing *)
      eexists; split; [|exact (inv_abandon N (Mt - 1 + P) P g p Hi)]; reflexivity.
    + exists (gnext (Mt - 1 + P) g (Finish p) (after_finish (real g) p)).
      split; [reflexivity | apply inv_finish; assumption].
Qed.

(* OB-TOK-1 *)
Theorem ob_tok_1 : forall N Mt P s, 1 <= Mt ->
  treachable N P (ge_rule Mt) s -> total N s <= Mt - 1 + N * P.
Proof.
  intros N Mt P s HMt Hr. destruct (ge_ghost N Mt P s HMt Hr) as (g & <- & Hi).
  pose proof (bound_of_inv N (Mt - 1 + P) P g Hi) as Hb.
  destruct N as [|N']; [unfold total; cbn [sum]; lia|].
  rewrite Nat.min_r in Hb by lia. replace (S N' - 1) with N' in Hb by lia. lia.
Qed.

(* OB-TOK-1 for Mt = 0: no check passes `view < 0`, every counter stays 0. *)
Theorem ob_tok_1_zero_cap : forall N P s,
  treachable N P (ge_rule 0) s -> total N s = 0.
Proof.
  intros N P s Hr.
  assert (Hz : forall q, slots s q = 0).
  { induction Hr as [|s a s' Hr IH Hs]; [reflexivity|].
    destruct Hs as [s p t Hp Ht1 HtP Hc | s p c Hp Hc Hk | s p c Hp Hc Hk Hrule
                   | s p c Hp Hc Hk Hrule | s p Hp Hpos]; intros q; try apply IH.
    - exfalso. unfold ge_rule in Hrule. cmp_to_prop. lia.
    - rewrite (IH p) in Hpos; lia. }
  unfold total. rewrite (sum_ext (slots s) (fun _ => 0)) by (intros; apply Hz).
  apply sum_zero.
Qed.

(* ------------------------------------------------------------------ *)
(* OB-TOK-1: the bound is reached *)

(* Server 0 admits Mt - 1 one-token requests alone (each check sees less
   than Mt); then every server starts a check of P tokens, all read every
   slot (each sees Mt - 1 < Mt) before any decides, and all admit. *)
Definition tok_schedule (N Mt P : nat) : list action :=
  concat (repeat (alone_round N) (Mt - 1)) ++ together N P.

Section TokTight.
  Variables N Mt P : nat.

  Lemma tok_round : forall i t, 1 <= N -> 1 <= P -> i < Mt - 1 -> alone_shape i t ->
    exists t', trun N P (ge_rule Mt) t (alone_round N) = Some t' /\ alone_shape (i + 1) t'.
  Proof.
    intros i t HN HP Hi [Hc Hs].
    unfold alone_round.
    rewrite (trun_one N P (ge_rule Mt) t (Start 0 1) _ (after_start t 0 1))
      by (unfold texec; cmp_simpl; rewrite (Hc 0); reflexivity).
    rewrite trun_app, (trun_run N P (ge_rule Mt) 0)
      by (intros a Ha; apply repeat_spec in Ha; subst a; reflexivity).
    assert (Hc1 : checks (after_start t 0 1) 0 = Some (mk_check 1 first_slot 0))
      by (unfold after_start; cbn [checks]; upd_simpl; reflexivity).
    destruct (tight_reads N 0 P N (after_start t 0 1) 0 (mk_check 1 first_slot 0)
                ltac:(lia) Hc1 ltac:(unfold first_slot; cbn; lia) ltac:(reflexivity))
      as (t2 & Hrun & Hs2 & Hc2 & Ho2).
    unfold after_start, first_slot in *; cbn [slots checks ck_n ck_next ck_view] in *.
    rewrite Nat.add_0_l in Hc2. rewrite Hrun; cbv beta iota.
    assert (Hsum : sum (slots t) N = i).
    { destruct N as [|N']; [lia|]. apply tight_sum_first; exact Hs. }
    rewrite (trun_one N P (ge_rule Mt) t2 (Decide 0) _ (after_admit t2 0 (mk_check 1 N i)))
      by (unfold texec; cmp_simpl; rewrite Hc2, Hsum; cbn [ck_next ck_view ck_n];
          unfold ge_rule; cmp_simpl; reflexivity).
    eexists; split; [reflexivity|]. unfold after_admit; split; intros q; cbn [slots checks].
    - destruct (Nat.eq_dec q 0) as [->|Hq]; upd_simpl; [reflexivity|].
      rewrite (Ho2 q Hq); upd_simpl; apply Hc.
    - rewrite Hs2. destruct (Nat.eq_dec q 0) as [->|Hq]; upd_simpl.
      + rewrite (Hs 0); simpl; lia.
      + rewrite (Hs q); destruct (Nat.eqb_spec q 0); [lia | reflexivity].
  Qed.

  Lemma tok_alone : forall k i t, 1 <= N -> 1 <= P -> i + k <= Mt - 1 -> alone_shape i t ->
    exists t', trun N P (ge_rule Mt) t (concat (repeat (alone_round N) k)) = Some t' /\
      alone_shape (i + k) t'.
  Proof.
    induction k as [|k IH]; intros i t HN HP Hk Ht.
    - exists t; rewrite Nat.add_0_r; split; [reflexivity | exact Ht].
    - cbn [repeat concat]; rewrite trun_app.
      destruct (tok_round i t HN HP ltac:(lia) Ht) as (t1 & Hr1 & Ht1); rewrite Hr1.
      destruct (IH (i + 1) t1 HN HP ltac:(lia) Ht1) as (t2 & Hr2 & Ht2).
      exists t2; split; [exact Hr2|]. replace (i + S k) with (i + 1 + k) by lia; exact Ht2.
  Qed.

  (* Servers 0..k-1 decide; each admits, its view V is below Mt. *)
  Lemma tok_decides : forall w V k s, k <= N -> V < Mt ->
    (forall q, q < N -> checks s q = Some (mk_check w N V)) ->
    exists t, trun N P (ge_rule Mt) s (map Decide (seq 0 k)) = Some t /\
      (forall q, q < N -> slots t q = (if q <? k then slots s q + w else slots s q) /\
                          checks t q = (if q <? k then None else checks s q)).
  Proof.
    intros w V k s; induction k as [|k IH]; intros Hk HV Hs.
    - exists s; split; [reflexivity|]. intros q Hq; simpl; split; reflexivity.
    - rewrite seq_S, map_app, trun_app.
      destruct (IH ltac:(lia) HV Hs) as (t & Hr & Ht); rewrite Hr; cbv beta iota; cbn [map Nat.add].
      destruct (Ht k ltac:(lia)) as [Hsk Hck]. revert Hck; cmp_simpl; intros Hck.
      rewrite (trun_one N P (ge_rule Mt) t (Decide k) _ (after_admit t k (mk_check w N V)))
        by (unfold texec; cmp_simpl; rewrite Hck, (Hs k) by lia; cbn [ck_next ck_view ck_n];
            cmp_simpl; unfold ge_rule; cmp_simpl; reflexivity).
      eexists; split; [reflexivity|]. intros q Hq; unfold after_admit; cbn [slots checks].
      destruct (Nat.eq_dec q k) as [->|Hqk]; upd_simpl.
      + rewrite Hsk; cmp_simpl; split; reflexivity.
      + destruct (Ht q Hq) as [Hsq Hcq]; rewrite Hsq, Hcq.
        destruct (Nat.ltb_spec q k); cmp_simpl; split; reflexivity.
  Qed.
End TokTight.

(* OB-TOK-1 is tight *)
Theorem ob_tok_1_tight : forall N Mt P, 1 <= N -> 1 <= Mt -> 1 <= P ->
  exists s, trun N P (ge_rule Mt) init (tok_schedule N Mt P) = Some s /\
    treachable N P (ge_rule Mt) s /\ total N s = Mt - 1 + N * P.
Proof.
  intros N Mt P HN HMt HP.
  (* phase 1: server 0 alone, up to c_0 = Mt - 1 *)
  destruct (tok_alone N Mt P (Mt - 1) 0 init HN HP ltac:(lia)) as (s1 & Hr1 & Hc1 & Hs1).
  { split; intros q; cbn; [reflexivity | destruct q; reflexivity]. }
  assert (Hsum1 : sum (slots s1) N = Mt - 1).
  { destruct N as [|N']; [lia|]. apply tight_sum_first; intros q; rewrite (Hs1 q); reflexivity. }
  (* phase 2: all start P, all read, all decide; each view is Mt - 1 < Mt *)
  destruct (tight_starts N 0 P P N s1 (le_n N) HP (le_n P) (fun q _ => Hc1 q))
    as (s2 & Hr2 & Hsl2 & Hc2).
  destruct (tight_all_read N 0 P P N s2 (le_n N)
              ltac:(intros q Hq; rewrite (Hc2 q Hq); cmp_simpl; reflexivity))
    as (s3 & Hr3 & Hsl3 & Hc3).
  destruct (tok_decides N Mt P P (sum (slots s2) N) N s3 (le_n N)
              ltac:(rewrite Hsl2, Hsum1; lia)
              ltac:(intros q Hq; rewrite (Hc3 q Hq); cmp_simpl; reflexivity))
    as (s4 & Hr4 & Ht4).
  assert (Hrun : trun N P (ge_rule Mt) init (tok_schedule N Mt P) = Some s4).
  { unfold tok_schedule, together.
    rewrite trun_app, Hr1; cbv beta iota.
    rewrite trun_app, (trun_run N P (ge_rule Mt) 0), Hr2; cbv beta iota.
    2: { intros a Ha; apply in_map_iff in Ha; destruct Ha as (p & <- & _); reflexivity. }
    rewrite trun_app, (trun_run N P (ge_rule Mt) 0), Hr3; cbv beta iota.
    2: { intros a Ha; apply in_flat_map in Ha; destruct Ha as (p & _ & Ha);
         apply repeat_spec in Ha; subst a; reflexivity. }
    exact Hr4. }
  exists s4; split; [exact Hrun|]. split.
  - exact (trun_reachable N P (ge_rule Mt) (tok_schedule N Mt P) init s4 (treach_init _ _ _) Hrun).
  - unfold total.
    rewrite (tight_sum_ext (slots s4) (fun j => slots s1 j + P) N).
    + rewrite tight_sum_plus, Hsum1. lia.
    + intros j Hj. destruct (Ht4 j Hj) as [Hs4 _]. rewrite Hs4, Hsl3, Hsl2. cmp_simpl. reflexivity.
Qed.

(* OB-TOK-1, both halves: the worst global queued tokens is exactly Mt - 1 + N*P. *)
Corollary ob_tok_1_exact : forall N Mt P, 1 <= N -> 1 <= Mt -> 1 <= P ->
  (forall s, treachable N P (ge_rule Mt) s -> total N s <= Mt - 1 + N * P) /\
  (exists s, treachable N P (ge_rule Mt) s /\ total N s = Mt - 1 + N * P).
Proof.
  intros N Mt P HN HMt HP. split.
  - intros s Hr; exact (ob_tok_1 N Mt P s HMt Hr).
  - destruct (ob_tok_1_tight N Mt P HN HMt HP) as (s & _ & Hr & Ht).
    exists s; split; [exact Hr | exact Ht].
Qed.

(* ------------------------------------------------------------------ *)
(* OB-TOK-2: the fits rule is the fine model with cap Mt and weight P *)

Lemma fits_is_fine : forall N Mt P s,
  treachable N P (fits_rule Mt) s <-> reachable N Mt P s.
Proof.
  assert (Hrule : forall Mt v t, fits_rule Mt v t = admits Mt v t).
  { intros Mt v t; unfold fits_rule, admits.
    apply Bool.eq_iff_eq_true; rewrite !Nat.leb_le; lia. }
  intros N Mt P s; split; intros Hr; induction Hr as [|s a s' Hr IH Hs].
  - apply reach_init.
  - apply reach_step with s a; [exact IH|].
    destruct Hs.
    + apply step_start; assumption.
    + apply step_read; assumption.
    + apply step_admit; try assumption; rewrite <- Hrule; assumption.
    + apply (step_reject N Mt P s p c); try assumption; rewrite <- Hrule; assumption.
    + apply step_finish; assumption.
  - apply treach_init.
  - apply treach_step with s a; [exact IH|].
    destruct Hs.
    + apply tstep_start; assumption.
    + apply tstep_read; assumption.
    + apply tstep_admit; try assumption; rewrite Hrule; assumption.
    + apply (tstep_reject N P (fits_rule Mt) s p c); try assumption; rewrite Hrule; assumption.
    + apply tstep_prefill; assumption.
Qed.

(* OB-TOK-2 *)
Theorem ob_tok_2 : forall N Mt P, 1 <= N -> 1 <= P ->
  (forall s, treachable N P (fits_rule Mt) s -> total N s <= Mt + (N - 1) * Nat.min Mt P) /\
  (exists s, treachable N P (fits_rule Mt) s /\ total N s = Mt + (N - 1) * Nat.min Mt P).
Proof.
  intros N Mt P HN HP. destruct (worst_case_exact N Mt P HN HP) as [Hb (s & Hr & Ht)]. split.
  - intros s' Hr'; apply Hb, fits_is_fine, Hr'.
  - exists s; split; [apply fits_is_fine, Hr | exact Ht].
Qed.

(* ------------------------------------------------------------------ *)
(* OB-TOK-3: write-then-check for tokens is WriteThenCheck.v with W = P: a
   server reserves t (1 <= t <= P) first, reads every slot (its reservation
   included), keeps iff the view is <= Mt, else gives it back; a Finish is
   one admitted queued token's prefill_done. *)

Theorem ob_tok_3 : forall N Mt P, 1 <= N -> 1 <= P ->
  (forall s, WriteThenCheck.reachable N Mt P s -> WriteThenCheck.admitted_total N s <= Mt) /\
  (exists s, WriteThenCheck.reachable N Mt P s /\ WriteThenCheck.admitted_total N s = Mt).
Proof.
  intros N Mt P HN HP. split.
  - exact (WriteThenCheck.wtc_admitted_le_cap N Mt P).
  - destruct (WriteThenCheck.wtc_cap_reached_for_all_n N Mt P HN HP) as (s & _ & Hr & Ht).
    exists s; split; [exact Hr | exact Ht].
Qed.

(* ------------------------------------------------------------------ *)
(* Instances by computation: the rows of specs/token-limit.md's table
   (N, Mt, P: ge worst): (1, 3, 2): 4; (2, 2, 2): 5; (2, 4, 3): 9;
   (3, 2, 1): 4; (3, 2, 2): 7. *)
Definition tok_worst (N Mt P : nat) : option nat :=
  option_map (total N) (trun N P (ge_rule Mt) init (tok_schedule N Mt P)).

Example tok_rows :
  map (fun r => match r with (N, Mt, P) => tok_worst N Mt P end)
    [(1, 3, 2); (2, 2, 2); (2, 4, 3); (3, 2, 1); (3, 2, 2)]
  = [Some 4; Some 5; Some 9; Some 4; Some 7].
Proof. vm_compute; reflexivity. Qed.

(* The same rows under fits (OB-TOK-2, Tightness.v's schedule with cap Mt and
   weight P): 3, 4, 7, 4, 6; and under write-then-check (OB-TOK-3,
   WriteThenCheck.v's cap_fill): Mt in every row. *)
Example fits_rows :
  map (fun r => match r with (N, Mt, P) =>
         option_map (total N) (trun N P (fits_rule Mt) init (tight_schedule N Mt P)) end)
    [(1, 3, 2); (2, 2, 2); (2, 4, 3); (3, 2, 1); (3, 2, 2)]
  = [Some 3; Some 4; Some 7; Some 4; Some 6].
Proof. vm_compute; reflexivity. Qed.

Example wtc_rows :
  map (fun r => match r with (N, Mt, P) =>
         option_map (WriteThenCheck.admitted_total N)
           (WriteThenCheck.run N Mt P WriteThenCheck.init (WriteThenCheck.cap_fill N Mt)) end)
    [(1, 3, 2); (2, 2, 2); (2, 4, 3); (3, 2, 1); (3, 2, 2)]
  = [Some 3; Some 2; Some 4; Some 2; Some 2].
Proof. vm_compute; reflexivity. Qed.

(* A check that sees Mt - 1 still admits a full prompt: N = 2, Mt = 2, P = 2
   ends with counters [3; 2]. *)
Example tok_2_2_2 :
  option_map (observe 2) (trun 2 2 (ge_rule 2) init (tok_schedule 2 2 2))
  = Some ([3; 2], [None; None]).
Proof. vm_compute; reflexivity. Qed.

(* A check that sees Mt is rejected (ge), although the fine model with cap
   Mt - 1 + P = 3 would admit its one token. *)
Example tok_rejects_at_the_cap :
  option_map (observe 1)
    (trun 1 2 (ge_rule 2) init [Start 0 2; Read 0; Decide 0; Start 0 1; Read 0; Decide 0])
  = Some ([2], [None]).
Proof. vm_compute; reflexivity. Qed.

Print Assumptions tstep_exec.
Print Assumptions prefill_done_reachable.
Print Assumptions ob_tok_1.
Print Assumptions ob_tok_1_zero_cap.
Print Assumptions ob_tok_1_tight.
Print Assumptions ob_tok_1_exact.
Print Assumptions ob_tok_2.
Print Assumptions ob_tok_3.
